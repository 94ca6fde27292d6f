// vtrnd's DMA fairness policy, as a plain class with no I/O so it can be
// unit-tested: every client has a FIFO of DMA jobs; each job is cut into
// chunks (a bounded piece of a transfer, or a batch of benchmark
// descriptors); chunks are handed out round-robin across the clients that
// have one ready, so one client's 4 MiB write or endless benchmark cannot
// starve another client's 64-byte read: the small job's chunk is issued
// after at most one chunk of each other active client (plus whatever is
// already in the rings, which each job's in-flight cap bounds).
//
// Within a client, jobs run strictly in order: a job's chunks are issued
// only when every earlier job of that client has fully completed (its
// chunks may run on different queues, so this is what keeps a client's
// write-then-read coherent). A job also caps how many of its own chunks may
// be in flight at once (its queue depth).
//
// It decides order only. Capacity (free ring slots, window buffers) is the
// caller's: when a picked chunk cannot go out, unissue() gives it back and
// the client keeps its turn.
#pragma once

#include <stdint.h>

#include <deque>
#include <map>
#include <optional>
#include <vector>

namespace drv {

class DmaScheduler {
 public:
  static constexpr uint64_t kUnbounded = UINT64_MAX;  // chunks until close()

  struct Pick {
    uint64_t client = 0;
    uint64_t job = 0;
    uint64_t chunk = 0;  // 0, 1, 2 ... in issue order within the job
  };

  // Appends a job to the client's FIFO (a new client joins the rotation
  // behind the current one).
  void add(uint64_t client, uint64_t job, uint64_t chunks, uint32_t max_inflight);
  // The next chunk to issue, counted as in flight; nullopt when no client
  // has one ready.
  std::optional<Pick> next();
  // The caller could not issue `p` after all: it becomes ready again, and
  // its client is the first candidate of the next call.
  void unissue(const Pick& p);
  // A chunk of the job completed. True when the job has finished: nothing
  // left to issue and nothing in flight (the caller answers it, then calls
  // remove()).
  bool done(uint64_t client, uint64_t job);
  // Stops issuing further chunks of the job (error, time is up); chunks in
  // flight still come back through done(). True when it is finished now.
  bool close(uint64_t client, uint64_t job);
  // Forgets a job (normally once finished).
  void remove(uint64_t client, uint64_t job);
  // Forgets a client and all its jobs (it disconnected); chunks in flight
  // are the caller's to drain (done() on an unknown job returns false).
  void remove_client(uint64_t client);

  [[nodiscard]] bool has_job(uint64_t client, uint64_t job) const;
  [[nodiscard]] uint32_t inflight(uint64_t client, uint64_t job) const;
  [[nodiscard]] size_t active_clients() const { return order_.size(); }

 private:
  struct Job {
    uint64_t id = 0;
    uint64_t remaining = 0;
    uint64_t issued = 0;
    uint32_t inflight = 0;
    uint32_t max_inflight = 1;
  };
  Job* find(uint64_t client, uint64_t job);
  const Job* find(uint64_t client, uint64_t job) const;
  void drop_if_empty(uint64_t client);

  std::map<uint64_t, std::deque<Job>> fifo_;
  std::vector<uint64_t> order_;  // rotation of clients that have jobs
  size_t cursor_ = 0;            // index into order_ of the next candidate
};

}  // namespace drv
