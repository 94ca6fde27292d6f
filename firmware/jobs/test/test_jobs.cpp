// Host tests of the jobs service logic (fw::jobs job model and scheduler,
// fw::cores bookkeeping): validation messages, scheduling order (priority,
// then round robin among clients), the cancel and timeout state machine,
// the bounded table, exactly one end event per job, and the split of a
// step's rows over several executors, single-threaded and with real threads.
// The HBM allocator is a fake list of live and poisoned ranges; the kernel
// runner records which rows ran where and touches no memory; the tensor
// engines are a fake queue per engine (tiles, failures, a broken queue,
// cancel with tiles in flight, engines that stop answering).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "fw/cores.h"
#include "fw/job_model.h"
#include "fw/job_sched.h"

using namespace fw::jobs;

namespace {

// The owner of the tests' common buffers: any job may use them, so tests
// about scheduling need not allocate per job. Owner tests add owned ranges.
constexpr uint64_t kShared = ~0ull;

struct Range {
  uint64_t addr, bytes;
  bool poisoned;
  uint64_t owner;
};

class FakeHbm final : public BufferCheck {
 public:
  std::vector<Range> live;
  void add(uint64_t addr, uint64_t bytes, uint64_t owner = kShared) {
    live.push_back({addr, bytes, false, owner});
  }
  void poison(uint64_t addr) {
    for (Range& r : live) {
      if (addr >= r.addr && addr < r.addr + r.bytes) r.poisoned = true;
    }
  }

 private:
  Access do_check(uint64_t addr, uint64_t bytes, uint64_t owner) override {
    for (const Range& r : live) {
      if (addr >= r.addr && addr + bytes <= r.addr + r.bytes) {
        if (r.owner != kShared && r.owner != owner) return Access::kNotOwner;
        return r.poisoned ? Access::kEccError : Access::kOk;
      }
    }
    return Access::kNotAllocated;
  }
};

struct Call {
  uint32_t core;
  uint32_t m;  // identifies the step in tests (distinct m per step)
  uint32_t begin, end;
};

class Recorder final : public ChunkRunner {
 public:
  std::vector<Call> calls;
  std::atomic<uint64_t> rows{0};

 private:
  void do_run(uint32_t core, const Step& s, uint32_t b, uint32_t e) override {
    calls.push_back({core, s.m, b, e});
    rows += e - b;
  }
};

class CountingRunner final : public ChunkRunner {
 public:
  std::atomic<uint64_t> rows{0};
  std::vector<std::atomic<uint32_t>> hits;
  explicit CountingRunner(size_t n) : hits(n) {}

 private:
  void do_run(uint32_t, const Step&, uint32_t b, uint32_t e) override {
    for (uint32_t r = b; r < e; ++r) hits[r].fetch_add(1);
    rows += e - b;
  }
};

// Tensor engines as the scheduler sees them: commands are recorded and, in
// auto mode, complete ok at the next poll (modeled time = flops / 1000 ns,
// wall time 1 us); `fail_row` makes the tile starting at that row complete
// with `fail_status`; `broken` latches an engine's queue.
class FakeTensor final : public TensorEngines {
 public:
  struct Cmd {
    uint32_t engine;
    vtrn::engine::TensorCommand c;
  };
  uint32_t n = 4;
  bool auto_complete = true;
  int64_t fail_row = -1;
  uint32_t fail_status = 0;
  uint32_t broken_engine = kMaxEngines;
  std::vector<Cmd> cmds;
  std::vector<vtrn::engine::TensorCommand> queued[kMaxEngines];
  uint32_t rings[kMaxEngines] = {};
  uint32_t max_queued = 0;
  bool broken_seen = false;

  // Completes up to `count` commands of engine e (all of them with UINT32_MAX).
  void complete(uint32_t e, uint32_t count = UINT32_MAX) {
    auto& q = queued[e];
    while (!q.empty() && count-- > 0) {
      const auto& c = q.front();
      vtrn::engine::TensorCompletion d{};
      d.cookie = c.cookie;
      d.engine = e;
      d.flops = 2ull * c.m * c.n * c.k;
      d.status = int64_t(uint32_t(c.cookie)) == fail_row ? fail_status : 0;
      d.wall_ns = 1000;
      d.modeled_ns = d.flops / 1000;
      done[e].push_back(d);
      q.erase(q.begin());
    }
  }
  std::vector<vtrn::engine::TensorCompletion> done[kMaxEngines];

 private:
  uint32_t do_count() const override { return n; }
  bool do_submit(uint32_t e, const vtrn::engine::TensorCommand& c) override {
    if (queued[e].size() + done[e].size() >= vtrn::engine::kTensorDepth) return false;
    cmds.push_back({e, c});
    queued[e].push_back(c);
    if (queued[e].size() > max_queued) max_queued = uint32_t(queued[e].size());
    return true;
  }
  void do_ring(uint32_t e) override { ++rings[e]; }
  Poll do_poll(uint32_t e, vtrn::engine::TensorCompletion* out, uint32_t* error) override {
    *error = 0;
    if (e == broken_engine) {
      *error = 3;
      broken_seen = true;
      return Poll::kBroken;
    }
    if (auto_complete) complete(e);
    if (done[e].empty()) return Poll::kEmpty;
    *out = done[e].front();
    done[e].erase(done[e].begin());
    return Poll::kDone;
  }
  bool do_pending(uint32_t e) const override {
    // A latched queue raises an error record (its interrupt wakes core 0 once).
    if (e == broken_engine) return !broken_seen;
    return !done[e].empty() || (auto_complete && !queued[e].empty());
  }
};

FakeHbm* g_hbm;
Scheduler* g_sched;
vtrn::Error g_err;

// Buffers at 1 MiB steps, each 1 MiB: enough for every shape used here.
constexpr uint64_t kMiB = 1 << 20;
uint64_t buf(int i) { return 0x44000000ull + uint64_t(i) * kMiB; }

Step add_step(uint32_t m, uint32_t n, int a, int b, int out) {
  Step s;
  s.kernel = kKernelAdd;
  s.dtype = 0;
  s.m = m;
  s.n = n;
  s.a = buf(a);
  s.b = buf(b);
  s.out = buf(out);
  return s;
}

Step gemm_step(uint32_t dtype, uint32_t m, uint32_t n, uint32_t k, int a, int b, int out) {
  Step s;
  s.kernel = kKernelGemm;
  s.dtype = dtype;
  s.m = m;
  s.n = n;
  s.k = k;
  s.a = buf(a);
  s.b = buf(b);
  s.out = buf(out);
  return s;
}

Submit job(uint64_t id, uint32_t client, uint32_t priority, std::initializer_list<Step> steps) {
  Submit s;
  s.job_id = id;
  s.owner = (2ull << 32) | id;
  s.client = client;
  s.priority = priority;
  for (const Step& st : steps) s.steps[s.step_count++] = st;
  return s;
}

int setup(void**) {
  g_hbm = new FakeHbm;
  for (int i = 0; i < 16; ++i) g_hbm->add(buf(i), kMiB);
  g_sched = new Scheduler;
  // Small chunks: a 64 x 8 f32 add (row cost 32) splits into 32 chunks of 2 rows.
  g_sched->init(0x2, 64);
  g_err = vtrn::Error();
  return 0;
}

int teardown(void**) {
  delete g_sched;
  delete g_hbm;
  return 0;
}

void accept(const Submit& s, uint64_t now = 0) {
  assert_true((g_err = validate(s, *g_hbm)).ok());
  assert_int_equal(int((g_err = g_sched->submit(s, now)).code()),
                   int(vtrn::Code::kOk));
}

// Runs executors (the cores in `cores`) and core 0 until nothing is left to
// do; returns the events in the order they were sent.
std::vector<EndReport> drain(ChunkRunner& runner, uint32_t cores, uint64_t now = 1000) {
  std::vector<EndReport> events;
  for (int guard = 0; guard < 100000; ++guard) {
    bool progress = false;
    g_sched->poll(now, true, *g_hbm);
    EndReport r;
    int slot;
    while ((slot = g_sched->next_event(&r)) >= 0) {
      events.push_back(r);
      g_sched->event_sent(slot);
      progress = true;
    }
    for (uint32_t c = 0; c < kMaxCores; ++c) {
      if (!(cores & (1u << c))) continue;
      uint32_t wake = 0;
      const ExecResult x = g_sched->exec(c, runner, &wake);
      if (x == ExecResult::kRan || x == ExecResult::kDetached) progress = true;
    }
    if (!progress && !g_sched->service_work(true)) return events;
  }
  fail_msg("scheduler did not settle");
  return events;
}

// validation

void expect_invalid(const Submit& s, const char* want) {
  assert_false((g_err = validate(s, *g_hbm)).ok());
  assert_string_equal(g_err.detail(), want);
}

void test_validation_rejects_step_counts_outside_1_to_16(void**) {
  Submit s = job(1, 1, 0, {});
  expect_invalid(s, "steps: a job needs at least one step");
  s.step_count = 17;
  expect_invalid(s, "steps: 17 steps, at most 16");
}

void test_validation_names_unknown_kernel_and_dtype(void**) {
  Submit s = job(1, 1, 0, {add_step(4, 4, 0, 1, 2), add_step(4, 4, 0, 1, 2)});
  s.steps[1].kernel = 9;
  expect_invalid(s, "steps[1].kernel: 9 is not a known kernel");
  s.steps[1].kernel = kKernelGemm;
  s.steps[1].dtype = 7;
  expect_invalid(s, "steps[1].dtype: 7 is not a known dtype");
  s.steps[1] = add_step(4, 4, 0, 1, 2);
  s.steps[1].dtype = 1;
  expect_invalid(s, "steps[1].dtype: add takes fp32 only, not bf16");
}

void test_validation_uses_check_gemm_for_shapes(void**) {
  Submit s = job(1, 1, 0, {gemm_step(4 /*mxfp4*/, 8, 8, 33, 0, 1, 2)});
  expect_invalid(s, "steps[0].k: 33 is not a multiple of 32 for mxfp4");
  s.steps[0].k = 0;
  expect_invalid(s, "steps[0].k: must be at least 1");
}

void test_validation_names_a_buffer_outside_live_allocations(void**) {
  // b = 64 x 64 f32 = 16 KiB starting 8 KiB before the end of buffer 1.
  Submit s = job(1, 1, 0, {add_step(4, 4, 0, 1, 2), gemm_step(0, 64, 64, 64, 3, 4, 5)});
  s.steps[1].b = buf(1) + kMiB - 8192;
  expect_invalid(s, "steps[1].b_addr: 0x441fe000 + 16384 is not inside a live allocation");
  s.steps[1].b = buf(4);
  s.steps[1].m = 8192;  // a = 8192 x 64 f32 = 2 MiB > the 1 MiB allocation
  expect_invalid(s, "steps[1].a_addr: 0x44300000 + 2097152 is not inside a live allocation");
}

void test_validation_reports_ecc_poisoned_buffers(void**) {
  g_hbm->poison(buf(2));
  Submit s = job(1, 1, 0, {add_step(4, 4, 0, 1, 2)});
  expect_invalid(s, "steps[0].out_addr: 0x44200000 + 64 has an uncorrectable ECC error");
}

uint64_t job_owner(uint64_t id) { return (2ull << 32) | id; }

void test_validation_refuses_buffers_of_another_owner(void**) {
  g_hbm->add(buf(16), kMiB, job_owner(1));
  g_hbm->add(buf(17), kMiB, job_owner(2));
  g_hbm->add(buf(18), kMiB, (1ull << 32) | 1);  // client 1's, the jobs' client
  Submit s = job(1, 1, 0, {add_step(4, 4, 16, 16, 16), add_step(4, 4, 16, 0, 17)});
  expect_invalid(s, "steps[1].out_addr: 0x45100000 + 64 belongs to another owner, not job 1's buffers");
  Submit t = job(2, 1, 0, {add_step(4, 4, 17, 17, 16)});
  expect_invalid(t, "steps[0].out_addr: 0x45000000 + 64 belongs to another owner, not job 2's buffers");
  s.steps[1] = add_step(4, 4, 18, 16, 16);
  expect_invalid(s, "steps[1].a_addr: 0x45200000 + 64 belongs to another owner, not job 1's buffers");
  s.steps[1] = add_step(4, 4, 16, 0, 16);
  assert_true((g_err = validate(s, *g_hbm)).ok());
  t.steps[0] = add_step(4, 4, 17, 17, 17);
  assert_true((g_err = validate(t, *g_hbm)).ok());
}

void test_validation_rejects_mxfp4_without_its_scales(void**) {
  Submit s = job(1, 1, 0, {gemm_step(4, 8, 8, 64, 0, 1, 2)});
  s.steps[0].a_scales = buf(3);
  s.steps[0].b_scales = 0x10;  // not HBM
  expect_invalid(s, "steps[0].b_scales_addr: 0x10 + 16 is not inside a live allocation");
  s.steps[0].b_scales = buf(4);
  assert_true((g_err = validate(s, *g_hbm)).ok());
}

void test_validation_rejects_gemm_output_overlapping_an_input(void**) {
  Submit s = job(1, 1, 0, {gemm_step(0, 8, 8, 8, 0, 1, 1)});
  expect_invalid(s, "steps[0].out_addr: 0x44100000 + 256 overlaps b_addr");
  // Elementwise kernels may run exactly in place.
  Submit e = job(2, 1, 0, {add_step(8, 8, 0, 1, 0)});
  assert_true((g_err = validate(e, *g_hbm)).ok());
}

void test_submit_copies_the_proto_and_keeps_the_sent_step_count(void**) {
  Vtrn__Ctrl__JobStep st = VTRN__CTRL__JOB_STEP__INIT;
  st.kernel = VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_SUM;
  st.m = 3;
  st.n = 5;
  st.a_addr = buf(0);
  st.out_addr = buf(1);
  Vtrn__Ctrl__JobStep* steps[20];
  for (auto*& p : steps) p = &st;
  Vtrn__Ctrl__JobSubmitRequest req = VTRN__CTRL__JOB_SUBMIT_REQUEST__INIT;
  req.job_id = 77;
  req.client = 4;
  req.priority = 2;
  req.timeout_ms = 50;
  req.n_steps = 20;
  req.steps = steps;
  Submit s;
  submit_from_proto(req, &s);
  assert_int_equal(s.job_id, 77);
  assert_int_equal(s.step_count, 20);
  assert_int_equal(s.steps[15].kernel, kKernelSum);
  assert_int_equal(s.steps[15].out, buf(1));
  expect_invalid(s, "steps: 20 steps, at most 16");
}

// scheduling

std::vector<uint64_t> start_order(const std::vector<Call>& calls,
                                  const std::map<uint32_t, uint64_t>& job_of_m) {
  std::vector<uint64_t> order;
  for (const Call& c : calls) {
    const uint64_t id = job_of_m.at(c.m);
    if (order.empty() || order.back() != id) order.push_back(id);
  }
  return order;
}

void test_lower_priority_value_runs_first(void**) {
  std::map<uint32_t, uint64_t> job_of_m;
  const uint32_t prios[3] = {2, 0, 1};
  for (uint64_t id = 1; id <= 3; ++id) {
    const uint32_t m = uint32_t(10 + id);
    job_of_m[m] = id;
    accept(job(id, 1, prios[id - 1], {add_step(m, 1, 0, 1, 2)}));
  }
  Recorder r;
  const auto events = drain(r, 0x2);
  assert_int_equal(events.size(), 3);
  const auto order = start_order(r.calls, job_of_m);
  assert_int_equal(order.size(), 3);
  assert_int_equal(order[0], 2);
  assert_int_equal(order[1], 3);
  assert_int_equal(order[2], 1);
}

void test_equal_priority_clients_take_turns(void**) {
  // Client 7 queues three jobs, client 3 two, client 5 one, all priority 1.
  std::map<uint32_t, uint64_t> job_of_m;
  const struct {
    uint64_t id;
    uint32_t client;
  } subs[] = {{1, 7}, {2, 7}, {3, 7}, {4, 3}, {5, 3}, {6, 5}};
  for (const auto& x : subs) {
    const uint32_t m = uint32_t(20 + x.id);
    job_of_m[m] = x.id;
    accept(job(x.id, x.client, 1, {add_step(m, 1, 0, 1, 2)}));
  }
  Recorder r;
  drain(r, 0x2);
  const auto order = start_order(r.calls, job_of_m);
  // Round robin by client id, FIFO within a client: 3, 5, 7, 3, 7, 7.
  const uint64_t want[] = {4, 6, 1, 5, 2, 3};
  assert_int_equal(order.size(), 6);
  for (size_t i = 0; i < 6; ++i) assert_int_equal(order[i], want[i]);
}

void test_full_table_answers_busy_until_an_event_is_sent(void**) {
  for (uint64_t id = 1; id <= kSlots; ++id) accept(job(id, 1, 0, {add_step(4, 4, 0, 1, 2)}));
  Submit extra = job(1000, 1, 0, {add_step(4, 4, 0, 1, 2)});
  assert_int_equal(int((g_err = g_sched->submit(extra, 0)).code()), int(vtrn::Code::kCapacity));
  assert_string_equal(g_err.detail(), "job table full: 64 jobs queued, running or ending; retry later");
  uint32_t state = 0, wake = 0;
  assert_true(g_sched->cancel(5, 10, &state, &wake));
  assert_int_equal(state, kCancelled);
  // Ended, but its event is still owed: the slot is not free yet.
  assert_int_equal(int((g_err = g_sched->submit(extra, 0)).code()), int(vtrn::Code::kCapacity));
  EndReport r;
  const int slot = g_sched->next_event(&r);
  assert_true(slot >= 0);
  assert_int_equal(r.job_id, 5);
  g_sched->event_sent(slot);
  assert_int_equal(int((g_err = g_sched->submit(extra, 0)).code()),
                   int(vtrn::Code::kOk));
  assert_int_equal(g_sched->counters().rejected, 2);
}

void test_duplicate_live_job_id_is_rejected(void**) {
  accept(job(9, 1, 0, {add_step(4, 4, 0, 1, 2)}));
  Submit again = job(9, 2, 0, {add_step(4, 4, 0, 1, 2)});
  assert_int_equal(int((g_err = g_sched->submit(again, 0)).code()),
                   int(vtrn::Code::kInvalidArgument));
  assert_string_equal(g_err.detail(), "job_id: 9 is already queued");
}

// cancel, timeout, failures

void test_cancel_of_a_queued_job_ends_it_at_once(void**) {
  accept(job(1, 1, 0, {add_step(4, 4, 0, 1, 2)}), 100);
  uint32_t state = 0, wake = 0;
  assert_true(g_sched->cancel(1, 150, &state, &wake));
  assert_int_equal(state, kCancelled);
  Recorder r;
  const auto events = drain(r, 0x2);
  assert_int_equal(events.size(), 1);
  assert_int_equal(events[0].state, kCancelled);
  assert_string_equal(events[0].reason, "cancelled while queued");
  assert_int_equal(events[0].start_ns, 0);
  assert_int_equal(events[0].end_ns, 150);
  assert_true(r.calls.empty());
  assert_false(g_sched->cancel(2, 150, &state, &wake));
}

void test_owed_event_keeps_core_0_awake_unless_the_ring_is_full(void**) {
  accept(job(1, 1, 0, {add_step(4, 4, 0, 1, 2)}));
  uint32_t state = 0, wake = 0;
  assert_true(g_sched->cancel(1, 5, &state, &wake));
  assert_true(g_sched->service_work(true, false));
  // Ring full: no spinning on core 0; the event stays owed.
  assert_false(g_sched->service_work(true, true));
  EndReport r;
  assert_true(g_sched->next_event(&r) >= 0);
}

void test_cancel_of_a_running_job_stops_at_the_next_chunk(void**) {
  const uint64_t owner = (2ull << 32) | 1;  // job(1, ...)'s buffers
  assert_false(g_sched->holds_owner(owner));
  accept(job(1, 1, 0, {add_step(64, 8, 0, 1, 2)}));  // 32 chunks
  assert_true(g_sched->holds_owner(owner));  // queued: pinned already
  assert_false(g_sched->holds_owner((2ull << 32) | 2));
  Recorder r;
  uint32_t wake = 0;
  assert_int_equal(g_sched->poll(10, true, *g_hbm), 0x2);
  assert_int_equal(int(g_sched->exec(1, r, &wake)), int(ExecResult::kRan));
  assert_int_equal(int(g_sched->exec(1, r, &wake)), int(ExecResult::kRan));
  uint32_t state = 0;
  assert_true(g_sched->cancel(1, 20, &state, &wake));
  assert_int_equal(state, kRunning);
  assert_int_equal(wake, 0x2);
  assert_true(g_sched->holds_owner(owner));  // its core may be inside a chunk
  // The executor leaves without another chunk; core 0 then ends the job.
  assert_int_equal(int(g_sched->exec(1, r, &wake)), int(ExecResult::kDetached));
  assert_int_equal(wake, Scheduler::kServiceCoreMask);
  const auto events = drain(r, 0x2, 30);
  assert_false(g_sched->holds_owner(owner));  // ended on the chip: unpinned
  assert_int_equal(r.calls.size(), 2);
  assert_int_equal(events.size(), 1);
  assert_int_equal(events[0].state, kCancelled);
  assert_string_equal(events[0].reason, "cancelled in step 0 of 1");
  // A second cancel reports the end state and changes nothing.
  assert_true(g_sched->cancel(1, 40, &state, &wake));
  assert_int_equal(state, kCancelled);
  assert_int_equal(g_sched->counters().cancelled, 1);
}

void test_timeout_stops_a_running_job_on_the_tick(void**) {
  Submit s = job(1, 1, 0, {add_step(64, 8, 0, 1, 2)});
  s.timeout_ms = 5;
  accept(s);
  Recorder r;
  uint32_t wake = 0;
  g_sched->poll(1000000, true, *g_hbm);  // starts at 1 ms chip time
  assert_int_equal(int(g_sched->exec(1, r, &wake)), int(ExecResult::kRan));
  assert_int_equal(g_sched->tick(5999999), 0);  // deadline is 6 ms
  assert_int_equal(g_sched->tick(6000000), 0x2);
  const auto events = drain(r, 0x2, 6100000);
  assert_int_equal(r.calls.size(), 1);
  assert_int_equal(events.size(), 1);
  assert_int_equal(events[0].state, kTimedOut);
  assert_string_equal(events[0].reason, "timed out after 5 ms in step 0 of 1 (chunk 1 of 32)");
  assert_int_equal(g_sched->counters().timed_out, 1);
}

// The stuck bound: a core that stays on a job after its stop (a chunk that
// never returns: the executor is simply not run here).
constexpr uint64_t kBound = 5000;

void test_stuck_counts_from_the_cancel_and_ends_when_the_cores_leave(void**) {
  g_sched->init(0x6, 64);
  accept(job(1, 1, 0, {add_step(64, 8, 0, 1, 2)}));  // 32 chunks
  Recorder r;
  uint32_t wake = 0, cores = 0xdead;
  assert_int_equal(g_sched->poll(10, true, *g_hbm), 0x6);
  assert_int_equal(int(g_sched->exec(1, r, &wake)), int(ExecResult::kRan));
  assert_int_equal(int(g_sched->exec(2, r, &wake)), int(ExecResult::kRan));
  // Running without a stop is never stuck, however long it runs.
  assert_int_equal(g_sched->stuck(1000000, kBound, &cores), -1);
  assert_int_equal(g_sched->job(0).stop_seen_ns, 0);
  uint32_t state = 0;
  assert_true(g_sched->cancel(1, 2000, &state, &wake));
  assert_int_equal(g_sched->job(0).stop_seen_ns, 2000);
  // Core 1 leaves at once; core 2 stays (its chunk does not return).
  assert_int_equal(int(g_sched->exec(1, r, &wake)), int(ExecResult::kDetached));
  g_sched->poll(2100, true, *g_hbm);
  assert_int_equal(g_sched->job(0).state, kRunning);
  // Within the bound (up to and including it): not stuck.
  assert_int_equal(g_sched->stuck(2000, kBound, &cores), -1);
  assert_int_equal(g_sched->stuck(2000 + kBound, kBound, &cores), -1);
  assert_int_equal(cores, 0xdead);
  // Past it: the slot, and only the core still on it.
  assert_int_equal(g_sched->stuck(2001 + kBound, kBound, &cores), 0);
  assert_int_equal(cores, 0x4);
  // A second cancel does not restart the bound.
  assert_true(g_sched->cancel(1, 3000, &state, &wake));
  assert_int_equal(g_sched->job(0).stop_seen_ns, 2000);
  // Once the core leaves, nothing is stuck and the job ends cancelled.
  assert_int_equal(int(g_sched->exec(2, r, &wake)), int(ExecResult::kDetached));
  assert_int_equal(g_sched->stuck(2001 + kBound, kBound, &cores), -1);
  const auto events = drain(r, 0x6, 2001 + kBound);
  assert_int_equal(events.size(), 1);
  assert_int_equal(events[0].state, kCancelled);
  assert_int_equal(g_sched->stuck(UINT64_MAX / 2, kBound, &cores), -1);
}

void test_stuck_counts_from_the_tick_that_timed_the_job_out(void**) {
  Submit s = job(1, 1, 0, {add_step(64, 8, 0, 1, 2)});
  s.timeout_ms = 5;
  accept(s);
  Recorder r;
  uint32_t wake = 0, cores = 0;
  g_sched->poll(1000000, true, *g_hbm);  // deadline at 6 ms
  assert_int_equal(int(g_sched->exec(1, r, &wake)), int(ExecResult::kRan));
  // Past the deadline but not yet ticked: no stop, nothing stuck.
  assert_int_equal(g_sched->stuck(6000000 + 10 * kBound, kBound, &cores), -1);
  // Ticked late (8 ms): the bound starts there, not at the deadline.
  assert_int_equal(g_sched->tick(8000000), 0x2);
  assert_int_equal(g_sched->job(0).stop_seen_ns, 8000000);
  assert_int_equal(g_sched->stuck(8000000 + kBound, kBound, &cores), -1);
  assert_int_equal(g_sched->stuck(8000001 + kBound, kBound, &cores), 0);
  assert_int_equal(cores, 0x2);
  const auto events = drain(r, 0x2, 8000001 + kBound);
  assert_int_equal(events.size(), 1);
  assert_int_equal(events[0].state, kTimedOut);
  // Slot 0 taken again (every other slot queued) starts with no stop.
  for (uint64_t id = 2; id <= kSlots; ++id) accept(job(id, 1, 0, {add_step(4, 4, 0, 1, 2)}), 9000000);
  accept(job(kSlots + 1, 1, 0, {add_step(4, 4, 0, 1, 2)}), 9000000);
  assert_int_equal(g_sched->job(0).sub.job_id, kSlots + 1);
  assert_int_equal(g_sched->job(0).stop_seen_ns, 0);
}

void test_ecc_error_before_a_step_fails_the_job_naming_the_step(void**) {
  accept(job(1, 1, 0, {add_step(4, 4, 0, 1, 2), add_step(4, 4, 2, 1, 3)}));
  Recorder r;
  uint32_t wake = 0;
  g_sched->poll(10, true, *g_hbm);
  while (g_sched->exec(1, r, &wake) == ExecResult::kRan) {
  }
  g_hbm->poison(buf(3));
  const auto events = drain(r, 0x2);
  assert_int_equal(events.size(), 1);
  assert_int_equal(events[0].state, kFailed);
  assert_int_equal(events[0].failed_step, 1);
  assert_string_equal(events[0].reason,
                      "steps[1].out_addr: 0x44300000 + 64 has an uncorrectable ECC error");
  // Step 1 never ran.
  for (const Call& c : r.calls) assert_int_equal(c.m, 4);
  assert_int_equal(r.rows.load(), 4);
}

void test_buffer_taken_by_another_owner_before_a_step_fails_the_job(void**) {
  g_hbm->add(buf(16), kMiB, job_owner(1));
  g_hbm->add(buf(17), kMiB, job_owner(1));
  accept(job(1, 1, 0, {add_step(4, 4, 16, 16, 16), add_step(4, 4, 16, 16, 17)}));
  Recorder r;
  uint32_t wake = 0;
  g_sched->poll(10, true, *g_hbm);
  while (g_sched->exec(1, r, &wake) == ExecResult::kRan) {
  }
  // Step 1's output now lies in another owner's allocation (freed behind
  // the job and handed out again): the step must not run.
  g_hbm->live.back().owner = job_owner(2);
  const auto events = drain(r, 0x2);
  assert_int_equal(events.size(), 1);
  assert_int_equal(events[0].state, kFailed);
  assert_int_equal(events[0].failed_step, 1);
  assert_string_equal(events[0].reason,
                      "steps[1].out_addr: 0x45100000 + 64 belongs to another owner, not job 1's buffers");
  for (const Call& c : r.calls) assert_int_equal(c.m, 4);
  assert_int_equal(r.rows.load(), 4);
}

void test_every_job_ends_with_exactly_one_event(void**) {
  g_sched->init(0x6, 64);
  Submit t = job(4, 2, 0, {add_step(64, 8, 0, 1, 2)});
  t.timeout_ms = 1;
  accept(job(1, 1, 0, {add_step(64, 8, 0, 1, 2), add_step(64, 8, 2, 1, 3)}));
  accept(job(2, 1, 1, {add_step(4, 4, 0, 1, 2)}));
  accept(job(3, 2, 1, {add_step(4, 4, 0, 1, 2)}));
  accept(t);
  uint32_t state = 0, wake = 0;
  assert_true(g_sched->cancel(2, 0, &state, &wake));
  Recorder r;
  std::map<uint64_t, int> seen;
  for (int round = 0; round < 200; ++round) {
    g_sched->poll(uint64_t(round) * 100000, true, *g_hbm);
    if (round == 3) g_sched->tick(10000000);
    EndReport e;
    int slot;
    while ((slot = g_sched->next_event(&e)) >= 0) {
      ++seen[e.job_id];
      g_sched->event_sent(slot);
    }
    g_sched->exec(1, r, &wake);
    g_sched->exec(2, r, &wake);
  }
  assert_int_equal(seen.size(), 4);
  for (const auto& [id, n] : seen) assert_int_equal(n, 1);
  const Counters& c = g_sched->counters();
  assert_int_equal(c.completed + c.cancelled + c.timed_out + c.failed, 4);
  assert_int_equal(g_sched->queued() + g_sched->running(), 0);
}

// multi-core split

void test_rows_of_each_step_are_split_over_the_executors_once(void**) {
  g_sched->init(0xe, 64);
  // Two dependent steps of 64 rows (32 chunks each) on three executors.
  accept(job(1, 1, 0, {add_step(64, 8, 0, 1, 2), add_step(65, 8, 2, 1, 3)}));
  Recorder r;
  const auto events = drain(r, 0xe);
  assert_int_equal(events.size(), 1);
  assert_int_equal(events[0].state, kDone);
  assert_int_equal(events[0].cores_used, 3);
  assert_int_equal(events[0].flops, 64 * 8 + 65 * 8);
  std::vector<int> hits0(64), hits1(65);
  uint32_t cores_seen = 0;
  bool second_started = false;
  for (const Call& c : r.calls) {
    cores_seen |= 1u << c.core;
    if (c.m == 65) second_started = true;
    // No chunk of step 0 runs after step 1 started.
    if (c.m == 64) assert_false(second_started);
    for (uint32_t row = c.begin; row < c.end; ++row) ++(c.m == 64 ? hits0 : hits1)[row];
  }
  assert_int_equal(cores_seen, 0xe);
  for (int h : hits0) assert_int_equal(h, 1);
  for (int h : hits1) assert_int_equal(h, 1);
}

void test_max_cores_and_chunk_count_bound_the_cores_given(void**) {
  g_sched->init(0xfe, 64);
  Submit s = job(1, 1, 0, {add_step(64, 8, 0, 1, 2)});
  s.max_cores = 2;
  accept(s);
  assert_int_equal(g_sched->poll(0, true, *g_hbm), 0x6);
  // A 1-chunk job takes one core even when more are free.
  accept(job(2, 1, 0, {add_step(2, 8, 0, 1, 3)}));
  assert_int_equal(g_sched->poll(0, true, *g_hbm), 0x8);
  // Nothing starts while the device is not active.
  accept(job(3, 1, 0, {add_step(2, 8, 0, 1, 3)}));
  assert_int_equal(g_sched->poll(0, false, *g_hbm), 0);
  assert_int_equal(g_sched->queued(), 1);
}

void test_threaded_executors_cover_every_row_once(void**) {
  // Real concurrency: three executor threads and a core-0 thread.
  g_sched->init(0xe, 64);
  accept(job(1, 1, 0, {add_step(4096, 8, 0, 1, 2)}));
  accept(job(2, 2, 0, {add_step(4096, 8, 3, 4, 5)}));
  CountingRunner runner(4096);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (uint32_t core = 1; core <= 3; ++core) {
    threads.emplace_back([core, &runner, &stop] {
      uint32_t wake = 0;
      while (!stop.load()) g_sched->exec(core, runner, &wake);
    });
  }
  int events = 0;
  for (int i = 0; i < 2000000 && events < 2; ++i) {
    g_sched->poll(uint64_t(i), true, *g_hbm);
    EndReport e;
    int slot;
    while ((slot = g_sched->next_event(&e)) >= 0) {
      assert_int_equal(e.state, kDone);
      ++events;
      g_sched->event_sent(slot);
    }
    std::this_thread::yield();
  }
  stop = true;
  for (auto& t : threads) t.join();
  assert_int_equal(events, 2);
  assert_int_equal(runner.rows.load(), 2 * 4096);
  for (auto& h : runner.hits) assert_int_equal(h.load(), 2);
}

// fw::cores

uint64_t g_fake_now = 0;
uint64_t fake_clock() { return g_fake_now; }

// tensor engines

FakeTensor* g_tensor;

int setup_tensor(void** state) {
  setup(state);
  g_tensor = new FakeTensor;
  g_sched->set_tensor_engines(g_tensor);
  return 0;
}

int teardown_tensor(void** state) {
  teardown(state);
  delete g_tensor;
  return 0;
}

void test_engine_default_is_tensor_with_engines_and_cores_without(void**) {
  uint32_t e = 99;
  assert_true(resolve_engine(kEngineDefault, 4, &e).ok());
  assert_int_equal(e, kEngineTensor);
  assert_true(resolve_engine(kEngineDefault, 0, &e).ok());
  assert_int_equal(e, kEngineCores);
  assert_true(resolve_engine(kEngineCores, 4, &e).ok());
  assert_int_equal(e, kEngineCores);
  g_err = resolve_engine(kEngineTensor, 0, &e);
  assert_string_equal(g_err.detail(), "engine: tensor, but this chip has no tensor engines (see its log)");
  g_err = resolve_engine(7, 4, &e);
  assert_string_equal(g_err.detail(), "engine: 7 is not a known engine");
}

void test_stitched_buffers_and_dtypes_the_engines_lack_are_named(void**) {
  Submit s = job(1, 1, 0, {add_step(4, 4, 0, 1, 2), gemm_step(0, 8, 8, 8, 0, 1, 2)});
  assert_true(tensor_eligible(s, 0x1f, buf(16)).ok());
  s.steps[1].b = 0x6000000000ull;
  g_err = tensor_eligible(s, 0x1f, 0x6000000000ull);
  assert_string_equal(g_err.detail(),
                      "steps[1].b_addr: 0x6000000000 is a stitched allocation the tensor engines cannot reach "
                      "(engine cores can)");
  // Engines that translate the remap window reach up to its end.
  const uint64_t end = 0x6000000000ull + (1ull << 30);
  assert_true(tensor_eligible(s, 0x1f, end).ok());
  s.steps[1].b = end - 16;
  g_err = tensor_eligible(s, 0x1f, end);
  assert_string_equal(g_err.detail(),
                      "steps[1].b_addr: 0x603ffffff0 is a stitched allocation the tensor engines cannot reach "
                      "(engine cores can)");
  s.steps[0].a = 0x6000000000ull;  // not a GEMM: the cores run it either way
  s.steps[1].b = buf(1);
  assert_true(tensor_eligible(s, 0x1f, 0x6000000000ull).ok());
  // Engines without MXFP4 (bit 4): such a GEMM is theirs no more.
  s.steps[1].dtype = uint32_t(vtrn::num::DType::kMXFP4);
  g_err = tensor_eligible(s, 0x0f, 0x6000000000ull);
  assert_string_equal(g_err.detail(), "steps[1].dtype: the tensor engines do not take mxfp4 (engine cores can)");
}

void test_tensor_job_on_a_chip_without_engines_is_rejected(void**) {
  Submit s = job(1, 1, 0, {gemm_step(0, 8, 8, 8, 0, 1, 2)});
  s.engine = kEngineTensor;
  assert_false((g_err = g_sched->submit(s, 0)).ok());
  assert_int_equal(int(g_err.code()), int(vtrn::Code::kInvalidArgument));
  assert_int_equal(g_sched->counters().rejected, 1);
}

void test_tensor_gemm_tiles_cover_every_row_once_across_the_engines(void**) {
  Recorder rec;
  // 2 x 64 x 64 flops per row: 16384 rows fit a tile, so 100 rows make one
  // tile per engine of 25 rows.
  Submit s = job(1, 1, 0, {gemm_step(uint32_t(vtrn::num::DType::kBF16), 100, 64, 64, 0, 1, 2)});
  accept(s);
  std::vector<EndReport> ev = drain(rec, 0x2);
  assert_int_equal(ev.size(), 1);
  assert_int_equal(ev[0].state, kDone);
  assert_int_equal(ev[0].engine, kEngineTensor);
  assert_int_equal(ev[0].engines_used, 4);
  assert_int_equal(ev[0].cores_used, 0);
  assert_true(rec.calls.empty());
  std::vector<int> hits(100);
  for (const FakeTensor::Cmd& c : g_tensor->cmds) {
    const uint32_t row = uint32_t(c.c.cookie);
    assert_int_equal(c.c.opcode, vtrn::engine::kTensorOpGemm);
    assert_int_equal(c.c.ldc, 64);
    assert_int_equal(c.c.n, 64);
    // A (bf16, 2 bytes) and C (f32) offset by the tile's first row, B whole.
    assert_int_equal(c.c.a, buf(0) + uint64_t(row) * 64 * 2);
    assert_int_equal(c.c.b, buf(1));
    assert_int_equal(c.c.c, buf(2) + uint64_t(row) * 64 * 4);
    for (uint32_t r = row; r < row + c.c.m; ++r) ++hits[r];
  }
  for (int h : hits) assert_int_equal(h, 1);
  // The engines ran in parallel: the busiest one's modeled time.
  assert_int_equal(ev[0].modeled_ns, 2ull * 25 * 64 * 64 / 1000);
  assert_int_equal(ev[0].engine_wall_ns, 4 * 1000);
  assert_int_equal(ev[0].flops, 2ull * 100 * 64 * 64);
}

void test_tensor_tiles_stay_bounded_per_engine_and_mxfp4_scales_follow_rows(void**) {
  Recorder rec;
  g_tensor->n = 1;
  g_tensor->auto_complete = false;
  // 2 x 1024 x 2048 flops per row: 128 rows per tile, 4 tiles; C (2 MiB)
  // in an allocation of its own.
  g_hbm->add(buf(8), 4 * kMiB);
  Step st = gemm_step(uint32_t(vtrn::num::DType::kMXFP4), 512, 1024, 2048, 0, 1, 8);
  st.a_scales = buf(3);
  st.b_scales = buf(4);
  Submit s = job(1, 1, 0, {st});
  accept(s);
  g_sched->poll(1, true, *g_hbm);
  assert_int_equal(g_tensor->cmds.size(), kTilesPerEngine);
  assert_false(g_sched->service_work(true));  // asleep until a completion
  uint32_t done = 9, total = 0;
  g_sched->progress(0, &done, &total);
  assert_int_equal(total, 4);
  assert_int_equal(done, 0);
  g_tensor->complete(0, 1);
  g_sched->poll(2, true, *g_hbm);
  g_sched->progress(0, &done, &total);
  assert_int_equal(done, 1);
  EndReport r;
  for (int i = 0; i < 4 && g_sched->next_event(&r) < 0; ++i) {
    g_tensor->complete(0, 1);
    assert_true(g_sched->service_work(true));
    g_sched->poll(2, true, *g_hbm);
  }
  g_tensor->auto_complete = true;
  std::vector<EndReport> ev = drain(rec, 0x2);
  assert_int_equal(ev.size(), 1);
  assert_int_equal(ev[0].state, kDone);
  assert_int_equal(g_tensor->max_queued, kTilesPerEngine);
  assert_int_equal(g_tensor->cmds.size(), 4);
  for (const FakeTensor::Cmd& c : g_tensor->cmds) {
    const uint32_t row = uint32_t(c.c.cookie);
    assert_int_equal(c.c.m, 128);
    assert_int_equal(c.c.c, buf(8) + uint64_t(row) * 1024 * 4);
    assert_int_equal(c.c.a, buf(0) + uint64_t(row) * 1024);
    assert_int_equal(c.c.a_scales, buf(3) + uint64_t(row) * 64);
    assert_int_equal(c.c.b_scales, buf(4));
  }
}

void test_max_cores_limits_the_tensor_engines_a_job_uses(void**) {
  Recorder rec;
  Submit s = job(1, 1, 0, {gemm_step(0, 64, 64, 64, 0, 1, 2)});
  s.max_cores = 2;
  accept(s);
  std::vector<EndReport> ev = drain(rec, 0x2);
  assert_int_equal(ev[0].state, kDone);
  assert_int_equal(ev[0].engines_used, 2);
  for (const FakeTensor::Cmd& c : g_tensor->cmds) assert_true(c.engine < 2);
}

void test_cores_engine_keeps_gemm_on_the_executors(void**) {
  Recorder rec;
  Submit s = job(1, 1, 0, {gemm_step(0, 8, 8, 8, 0, 1, 2)});
  s.engine = kEngineCores;
  accept(s);
  std::vector<EndReport> ev = drain(rec, 0x2);
  assert_int_equal(ev[0].state, kDone);
  assert_int_equal(ev[0].engine, kEngineCores);
  assert_int_equal(ev[0].cores_used, 1);
  assert_true(g_tensor->cmds.empty());
  assert_false(rec.calls.empty());
}

void test_tensor_step_then_core_step_run_in_order(void**) {
  Recorder rec;
  Submit s = job(1, 1, 0, {gemm_step(0, 8, 8, 8, 0, 1, 2), add_step(8, 8, 2, 2, 3)});
  accept(s);
  std::vector<EndReport> ev = drain(rec, 0x2);
  assert_int_equal(ev.size(), 1);
  assert_int_equal(ev[0].state, kDone);
  assert_int_equal(ev[0].cores_used, 1);
  assert_false(g_tensor->cmds.empty());
  for (const Call& c : rec.calls) assert_int_equal(c.m, 8);  // only the add ran on a core
  uint64_t rows = 0;
  for (const Call& c : rec.calls) rows += c.end - c.begin;
  assert_int_equal(rows, 8);
}

void test_failed_tile_fails_the_job_naming_engine_status_and_rows(void**) {
  Recorder rec;
  g_tensor->fail_row = 50;
  g_tensor->fail_status = vtrn::engine::kTensorMpuFault;
  Submit s = job(1, 1, 0, {add_step(4, 4, 5, 6, 7), gemm_step(0, 100, 64, 64, 0, 1, 2)});
  accept(s);
  std::vector<EndReport> ev = drain(rec, 0x2);
  assert_int_equal(ev.size(), 1);
  assert_int_equal(ev[0].state, kFailed);
  assert_int_equal(ev[0].failed_step, 1);
  assert_string_equal(ev[0].reason, "steps[1]: tensor engine 2: mpu fault (status 7) on rows 50..75");
  assert_int_equal(g_sched->counters().tile_errors, 1);
}

void test_injected_fault_names_itself(void**) {
  Recorder rec;
  g_tensor->fail_row = 0;
  g_tensor->fail_status = vtrn::engine::kTensorInjected;
  accept(job(1, 1, 0, {gemm_step(0, 4, 4, 4, 0, 1, 2)}));
  std::vector<EndReport> ev = drain(rec, 0x2);
  assert_int_equal(ev[0].state, kFailed);
  assert_string_equal(ev[0].reason, "steps[0]: tensor engine 0: injected fault (status 9) on rows 0..1");
}

void test_cancel_of_a_tensor_job_ends_it_once_its_tiles_are_back(void**) {
  Recorder rec;
  g_tensor->auto_complete = false;
  accept(job(1, 1, 0, {gemm_step(0, 100, 64, 64, 0, 1, 2)}));
  g_sched->poll(1, true, *g_hbm);
  const size_t sent = g_tensor->cmds.size();
  assert_int_equal(sent, 4);
  uint32_t state = 0, wake = 0;
  assert_true(g_sched->cancel(1, 2, &state, &wake));
  assert_int_equal(state, kRunning);
  g_sched->poll(3, true, *g_hbm);
  EndReport r;
  assert_int_equal(g_sched->next_event(&r), -1);  // tiles still on the engines
  for (uint32_t e = 0; e < 4; ++e) g_tensor->complete(e);
  std::vector<EndReport> ev = drain(rec, 0x2);
  assert_int_equal(ev.size(), 1);
  assert_int_equal(ev[0].state, kCancelled);
  assert_int_equal(g_tensor->cmds.size(), sent);  // nothing submitted after the cancel
}

void test_broken_engine_fails_the_jobs_with_tiles_on_it(void**) {
  Recorder rec;
  g_tensor->auto_complete = false;
  accept(job(1, 1, 0, {gemm_step(0, 100, 64, 64, 0, 1, 2)}));
  g_sched->poll(1, true, *g_hbm);
  g_tensor->broken_engine = 1;
  g_tensor->auto_complete = true;
  std::vector<EndReport> ev = drain(rec, 0x2);
  assert_int_equal(ev.size(), 1);
  assert_int_equal(ev[0].state, kFailed);
  assert_string_equal(ev[0].reason, "steps[0]: tensor engine 1 broke its queue (error 3); its tiles are lost");
}

void test_lost_engines_fail_jobs_with_tiles_in_flight(void**) {
  Recorder rec;
  g_tensor->auto_complete = false;
  accept(job(1, 1, 0, {gemm_step(0, 100, 64, 64, 0, 1, 2)}));
  g_sched->poll(1, true, *g_hbm);
  assert_int_equal(g_sched->tiles_in_flight(), 4);
  g_sched->tensor_lost("tensor engines stopped answering", 7);
  assert_int_equal(g_sched->tiles_in_flight(), 0);
  // Its stop is dated, but no core is on it: nothing for the stuck bound.
  assert_int_equal(g_sched->job(0).stop_seen_ns, 7);
  uint32_t cores = 0;
  assert_int_equal(g_sched->stuck(UINT64_MAX / 2, 1000, &cores), -1);
  std::vector<EndReport> ev = drain(rec, 0x2);
  assert_int_equal(ev.size(), 1);
  assert_int_equal(ev[0].state, kFailed);
  assert_string_equal(ev[0].reason, "steps[0]: tensor engines stopped answering");
}

void test_tensor_jobs_share_the_engines_and_all_end(void**) {
  Recorder rec;
  for (uint64_t id = 1; id <= 6; ++id) accept(job(id, uint32_t(id), 0, {gemm_step(0, 64, 512, 512, 0, 1, 2)}));
  std::vector<EndReport> ev = drain(rec, 0x2);
  assert_int_equal(ev.size(), 6);
  for (const EndReport& r : ev) assert_int_equal(r.state, kDone);
  assert_true(g_tensor->max_queued <= kTilesPerEngine);
  assert_int_equal(g_sched->counters().stray_completions, 0);
}

void test_core_snapshot_accumulates_time_per_state(void**) {
  g_fake_now = 100;
  fw::cores::init(3, fake_clock);
  assert_int_equal(fw::cores::count(), 3);
  g_fake_now = 1100;
  fw::cores::set_state(1, fw::cores::kCoreIdle, 0);
  g_fake_now = 1600;
  fw::cores::set_state(1, fw::cores::kCoreRunning, 900);
  g_fake_now = 2000;
  fw::cores::CoreSnapshot s{};
  fw::cores::snapshot(1, &s);
  assert_int_equal(s.state, fw::cores::kCoreRunning);
  assert_int_equal(s.intensity_permille, 900);
  assert_int_equal(s.off_ns, 1000);
  assert_int_equal(s.idle_ns, 500);
  assert_int_equal(s.busy_ns, 400);
  fw::cores::snapshot(2, &s);
  assert_int_equal(s.state, fw::cores::kCoreOff);
  assert_int_equal(s.off_ns, 1900);
  fw::cores::snapshot(5, &s);
  assert_int_equal(s.state, fw::cores::kCoreOff);
  assert_int_equal(s.off_ns, 0);
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_validation_rejects_step_counts_outside_1_to_16, setup, teardown),
      cmocka_unit_test_setup_teardown(test_validation_names_unknown_kernel_and_dtype, setup, teardown),
      cmocka_unit_test_setup_teardown(test_validation_uses_check_gemm_for_shapes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_validation_names_a_buffer_outside_live_allocations, setup, teardown),
      cmocka_unit_test_setup_teardown(test_validation_reports_ecc_poisoned_buffers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_validation_refuses_buffers_of_another_owner, setup, teardown),
      cmocka_unit_test_setup_teardown(test_validation_rejects_mxfp4_without_its_scales, setup, teardown),
      cmocka_unit_test_setup_teardown(test_validation_rejects_gemm_output_overlapping_an_input, setup, teardown),
      cmocka_unit_test_setup_teardown(test_submit_copies_the_proto_and_keeps_the_sent_step_count, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lower_priority_value_runs_first, setup, teardown),
      cmocka_unit_test_setup_teardown(test_equal_priority_clients_take_turns, setup, teardown),
      cmocka_unit_test_setup_teardown(test_full_table_answers_busy_until_an_event_is_sent, setup, teardown),
      cmocka_unit_test_setup_teardown(test_duplicate_live_job_id_is_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_of_a_queued_job_ends_it_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_owed_event_keeps_core_0_awake_unless_the_ring_is_full, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cancel_of_a_running_job_stops_at_the_next_chunk, setup, teardown),
      cmocka_unit_test_setup_teardown(test_timeout_stops_a_running_job_on_the_tick, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stuck_counts_from_the_cancel_and_ends_when_the_cores_leave, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stuck_counts_from_the_tick_that_timed_the_job_out, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ecc_error_before_a_step_fails_the_job_naming_the_step, setup, teardown),
      cmocka_unit_test_setup_teardown(test_buffer_taken_by_another_owner_before_a_step_fails_the_job, setup, teardown),
      cmocka_unit_test_setup_teardown(test_every_job_ends_with_exactly_one_event, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rows_of_each_step_are_split_over_the_executors_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_max_cores_and_chunk_count_bound_the_cores_given, setup, teardown),
      cmocka_unit_test_setup_teardown(test_threaded_executors_cover_every_row_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_engine_default_is_tensor_with_engines_and_cores_without, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stitched_buffers_and_dtypes_the_engines_lack_are_named, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tensor_job_on_a_chip_without_engines_is_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tensor_gemm_tiles_cover_every_row_once_across_the_engines, setup_tensor, teardown_tensor),
      cmocka_unit_test_setup_teardown(test_tensor_tiles_stay_bounded_per_engine_and_mxfp4_scales_follow_rows, setup_tensor, teardown_tensor),
      cmocka_unit_test_setup_teardown(test_max_cores_limits_the_tensor_engines_a_job_uses, setup_tensor, teardown_tensor),
      cmocka_unit_test_setup_teardown(test_cores_engine_keeps_gemm_on_the_executors, setup_tensor, teardown_tensor),
      cmocka_unit_test_setup_teardown(test_tensor_step_then_core_step_run_in_order, setup_tensor, teardown_tensor),
      cmocka_unit_test_setup_teardown(test_failed_tile_fails_the_job_naming_engine_status_and_rows, setup_tensor, teardown_tensor),
      cmocka_unit_test_setup_teardown(test_injected_fault_names_itself, setup_tensor, teardown_tensor),
      cmocka_unit_test_setup_teardown(test_cancel_of_a_tensor_job_ends_it_once_its_tiles_are_back, setup_tensor, teardown_tensor),
      cmocka_unit_test_setup_teardown(test_broken_engine_fails_the_jobs_with_tiles_on_it, setup_tensor, teardown_tensor),
      cmocka_unit_test_setup_teardown(test_lost_engines_fail_jobs_with_tiles_in_flight, setup_tensor, teardown_tensor),
      cmocka_unit_test_setup_teardown(test_tensor_jobs_share_the_engines_and_all_end, setup_tensor, teardown_tensor),
      cmocka_unit_test_setup_teardown(test_core_snapshot_accumulates_time_per_state, setup, teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
