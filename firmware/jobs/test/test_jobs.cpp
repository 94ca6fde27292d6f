// Host tests of the jobs service logic (fw::jobs job model and scheduler,
// fw::cores bookkeeping): validation messages, scheduling order (priority,
// then round robin among clients), the cancel and timeout state machine,
// the bounded table, exactly one end event per job, and the split of a
// step's rows over several executors, single-threaded and with real threads.
// The HBM allocator is a fake list of live and poisoned ranges; the kernel
// runner records which rows ran where and touches no memory.
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

struct Range {
  uint64_t addr, bytes;
  bool poisoned;
};

class FakeHbm final : public BufferCheck {
 public:
  std::vector<Range> live;
  void add(uint64_t addr, uint64_t bytes) { live.push_back({addr, bytes, false}); }
  void poison(uint64_t addr) {
    for (Range& r : live) {
      if (addr >= r.addr && addr < r.addr + r.bytes) r.poisoned = true;
    }
  }

 private:
  Access do_check(uint64_t addr, uint64_t bytes) override {
    for (const Range& r : live) {
      if (addr >= r.addr && addr + bytes <= r.addr + r.bytes) {
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
  accept(job(1, 1, 0, {add_step(64, 8, 0, 1, 2)}));  // 32 chunks
  Recorder r;
  uint32_t wake = 0;
  assert_int_equal(g_sched->poll(10, true, *g_hbm), 0x2);
  assert_int_equal(int(g_sched->exec(1, r, &wake)), int(ExecResult::kRan));
  assert_int_equal(int(g_sched->exec(1, r, &wake)), int(ExecResult::kRan));
  uint32_t state = 0;
  assert_true(g_sched->cancel(1, 20, &state, &wake));
  assert_int_equal(state, kRunning);
  assert_int_equal(wake, 0x2);
  // The executor leaves without another chunk; core 0 then ends the job.
  assert_int_equal(int(g_sched->exec(1, r, &wake)), int(ExecResult::kDetached));
  assert_int_equal(wake, Scheduler::kServiceCoreMask);
  const auto events = drain(r, 0x2, 30);
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
      cmocka_unit_test_setup_teardown(test_ecc_error_before_a_step_fails_the_job_naming_the_step, setup, teardown),
      cmocka_unit_test_setup_teardown(test_every_job_ends_with_exactly_one_event, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rows_of_each_step_are_split_over_the_executors_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_max_cores_and_chunk_count_bound_the_cores_given, setup, teardown),
      cmocka_unit_test_setup_teardown(test_threaded_executors_cover_every_row_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_core_snapshot_accumulates_time_per_state, setup, teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
