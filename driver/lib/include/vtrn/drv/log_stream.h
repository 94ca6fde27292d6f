// One chip's firmware log as the host keeps it: the last `keep` lines
// (oldest first) and the live subscribers (`vtrn logs --follow`), each
// seeing every batch of new lines with the bytes the ring lost before them.
// Lines come from the chip and are untrusted: they are made printable on
// the way in.
//
// What it is not: the log ring reader (HostInterface::read_log_lines) nor
// the UART/QEMU fallback of a chip that never got its ring up (Chip).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace drv {

inline constexpr size_t kLogHistoryLines = 4096;

class LogStream {
 public:
  using Listener = std::function<void(const std::vector<std::string>& lines, uint64_t lost)>;

  explicit LogStream(size_t keep = kLogHistoryLines) : keep_(keep) {}

  // A batch read from the ring; nothing happens for an empty batch that
  // lost nothing. Listeners may subscribe or unsubscribe from inside.
  void add(std::vector<std::string> lines, uint64_t lost);
  [[nodiscard]] const std::deque<std::string>& history() const { return history_; }
  // The last n lines kept (fewer when fewer are kept).
  [[nodiscard]] std::vector<std::string> last(size_t n) const;
  int subscribe(Listener l);
  void unsubscribe(int id) { listeners_.erase(id); }

 private:
  size_t keep_;
  std::deque<std::string> history_;
  std::map<int, Listener> listeners_;
  int next_ = 1;
};

}  // namespace drv
