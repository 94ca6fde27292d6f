// vtrn jobs ABI: the job status table the firmware publishes in BAR2 region
// kRegionJobs (hostif.h), read by vtrnd for `vtrn jobs` and for hang
// detection. Same conventions as hostif.h: fixed-width little-endian
// fields, the firmware is the only writer, the host only reads.
//
// Layout: JobTableHeader at offset 0, then kJobCoreCount CoreEntry records
// (one per possible NeuronCore), then header.entry_count JobEntry records
// (one per firmware job slot; a slot keeps its last job until reused, so an
// ended job stays visible for a while). Every record has its own sequence
// counter: odd while the firmware writes it, even when stable. A reader
// copies the record between two reads of `seq` (acquire) and retries when
// they differ or are odd; the header's counters follow the same rule with
// header.seq.
//
// Not the job protocol: jobs are submitted and reported through the
// control queue (vtrn_ctrl_jobs.proto); this table is a read-only mirror
// for observers.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/hostif.h"

namespace vtrn::jobs {

inline constexpr uint32_t kJobTableMagic = 0x424f4a56;  // "VJOB"
inline constexpr uint32_t kJobTableVersion = 1;
inline constexpr uint32_t kJobCoreCount = 8;       // vtrn,neuron-cores maximum
inline constexpr uint32_t kJobReasonLen = 48;

// Values of JobEntry::state: the vtrn.ctrl.JobState numbers.
enum EntryState : uint32_t {
  kEntryFree = 0,       // never used since boot
  kEntryQueued = 1,
  kEntryRunning = 2,
  kEntryDone = 3,
  kEntryFailed = 4,
  kEntryCancelled = 5,
  kEntryTimedOut = 6,
};

// Values of CoreEntry::state (fw::cores::CoreState).
enum CoreEntryState : uint32_t {
  kCoreEntryOff = 0,
  kCoreEntryIdle = 1,
  kCoreEntryRunning = 2,
};

struct JobTableHeader {
  uint32_t seq;             // odd while the counters below change
  uint32_t magic;           // kJobTableMagic
  uint32_t version;         // kJobTableVersion
  uint32_t header_bytes;    // sizeof(JobTableHeader)
  uint32_t core_bytes;      // sizeof(CoreEntry)
  uint32_t entry_bytes;     // sizeof(JobEntry)
  uint32_t core_count;      // NeuronCores of this chip (<= kJobCoreCount)
  uint32_t entry_count;     // job slots (JobEntry records after the cores)
  uint32_t executor_mask;   // bit n: core n runs kernel chunks
  uint32_t queued;          // jobs waiting now
  uint32_t running;         // jobs on cores now
  uint32_t reserved0;
  uint64_t updated_ns;      // chip time of the last refresh
  uint64_t accepted;        // since boot
  uint64_t completed;       // ended DONE
  uint64_t failed;          // ended FAILED
  uint64_t cancelled;       // ended CANCELLED
  uint64_t timed_out;       // ended TIMED_OUT
  uint64_t rejected;        // submits refused (bad request or busy)
  uint64_t reserved1[3];
};
static_assert(sizeof(JobTableHeader) == 128);
static_assert(offsetof(JobTableHeader, updated_ns) == 48);
static_assert(offsetof(JobTableHeader, rejected) == 96);

struct CoreEntry {
  uint32_t seq;
  uint32_t state;               // CoreEntryState
  uint32_t intensity_permille;  // of the kernel it runs, 0 when not running
  uint32_t slot;                // job slot it works on, 0xffffffff if none
  uint64_t job_id;              // 0 if none
  uint64_t busy_ns;             // since boot
  uint64_t idle_ns;
  uint64_t off_ns;
  uint64_t chunks;              // kernel chunks executed since boot
  uint64_t reserved;
};
static_assert(sizeof(CoreEntry) == 64);

struct JobEntry {
  uint32_t seq;
  uint32_t state;               // EntryState
  uint64_t job_id;
  uint32_t client;
  uint32_t priority;
  uint32_t step;                // step running now (or where it stopped)
  uint32_t step_count;
  uint32_t core_mask;           // cores working on it now
  uint32_t cores_used;          // cores it was given
  uint64_t queued_ns;           // chip times; 0 = not yet
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t deadline_ns;         // 0 = no timeout
  uint32_t chunks_done;         // of the current step
  uint32_t chunks_total;
  char reason[kJobReasonLen];   // NUL-terminated; why it ended (empty for DONE)
};
static_assert(sizeof(JobEntry) == 128);
static_assert(offsetof(JobEntry, queued_ns) == 40);
static_assert(offsetof(JobEntry, reason) == 80);

inline constexpr uint64_t kCoresOffset = sizeof(JobTableHeader);
inline constexpr uint64_t kEntriesOffset = kCoresOffset + kJobCoreCount * sizeof(CoreEntry);
// Slots that fit the region; the firmware uses fewer (header.entry_count).
inline constexpr uint32_t kMaxEntries =
    uint32_t((hostif::kJobsSize - kEntriesOffset) / sizeof(JobEntry));
static_assert(kMaxEntries >= 64);

}  // namespace vtrn::jobs
