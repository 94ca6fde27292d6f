// RuntimeDir: vtrnd's claim on its runtime directory (vtrnd.pid, vtrnd.sock,
// vtrnd.log and one directory per chip), the way a daemon takes its
// /run/<name> directory: created 0700 (0750 with a share group), refused when
// it is not ours or others can write it, refused while another vtrnd is
// alive in it, cleaned of a crashed one's leftovers otherwise, and removed
// again on an orderly stop.
//
// What it is not: the chips' own files (each Chip cleans its directory) or
// the client side's trust check (drv::Client checks the server's uid).
#pragma once

#include <string>

#include "vtrn/drv/error.h"
#include "vtrn/drv/fd.h"

namespace drv {

class RuntimeDir {
 public:
  RuntimeDir() = default;
  ~RuntimeDir() = default;  // keeps the files: release() is an explicit decision
  RuntimeDir(const RuntimeDir&) = delete;
  RuntimeDir& operator=(const RuntimeDir&) = delete;

  // Takes `dir` for this process: kUntrusted when it is not a directory,
  // belongs to another user or is writable by others; kBusy when a live
  // vtrnd answers on its socket; kSystem when the OS refuses. On success
  // vtrnd.pid holds our pid. share_gid >= 0: the directory is 0750 and
  // that group's.
  Error take(const std::string& dir, int share_gid);
  // The listening socket vtrnd.sock: 0600 from its creation (0660 and the
  // share group's when sharing).
  Result<UniqueFd> listen_socket() const;
  // Removes vtrnd.sock, vtrnd.pid, vtrnd.log unless keep_log (a failed
  // start keeps it: the caller reads the reason there) and the directory
  // if it is empty then. Nothing when take() did not succeed.
  void release(bool keep_log);

  [[nodiscard]] bool owned() const { return owned_; }
  [[nodiscard]] const std::string& path() const { return dir_; }
  [[nodiscard]] std::string socket_path() const { return dir_ + "/vtrnd.sock"; }
  [[nodiscard]] std::string pid_path() const { return dir_ + "/vtrnd.pid"; }

 private:
  std::string dir_;
  int share_gid_ = -1;
  bool owned_ = false;
};

}  // namespace drv
