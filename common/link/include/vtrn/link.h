// One port of a chip-to-chip link: the LTSSM that trains it with the peer
// (speed and width negotiation, retraining, downgrade), the data link layer
// that moves frames once it is up (sequence numbers, CRC32, ACK/NAK, a
// bounded replay buffer, credit flow control), power states on idle, error
// injection, and the per-port counters. Portable C++: the firmware runs one
// Port per link port from its main loop, host tests run two in one process.
//
// It is not the transport (vtrn/link_transport.h moves the frames) and not
// the board: capabilities, timeouts and which side a chip is come from the
// board description through the caller. No heap, no exceptions, no RTTI:
// the caller hands in a storage buffer (Port::storage_bytes()).
//
// The model follows PCIe where that is cheap and stops where it is not:
// ordered sets are CRC-protected control frames, lanes and GT/s are numbers
// that shape the negotiated width/speed and a token-bucket bandwidth model,
// not bit streams. Everything the peer sends is checked; the worst a hostile
// peer can do is keep the link out of L0. Time is whatever monotonic
// nanosecond clock the caller passes to poll(), so tests use a fake one.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "vtrn/link_transport.h"

namespace vtrn::link {

// LTSSM states. Closed list; values are reported to the host.
enum class LinkState : uint8_t {
  kDetect = 0,         // looking for a live peer; nothing is sent
  kPolling = 1,        // peer present: exchanging TS1 with capabilities
  kConfiguration = 2,  // capabilities known: exchanging TS2 with the negotiated speed/width
  kL0 = 3,             // up: data flows
  kRecovery = 4,       // retraining an up link (errors, request, lane change, L1 exit);
                       // the data link layer keeps its state and replays afterwards
  kL0s = 5,            // up, transmitter idle (entered on idle, left on traffic)
  kL1 = 6,             // up, both ends idle; left through Recovery
  kDisabled = 7,       // turned off locally; the peer sees it and stays in Detect
  kLoopback = 8,       // test mode: the slave echoes the master's loopback frames
};
inline constexpr uint32_t kLinkStateCount = 9;

// Signalling rates, PCIe generations 1..6.
enum class LinkSpeed : uint8_t {
  kNone = 0,
  k2_5GT = 1,
  k5GT = 2,
  k8GT = 3,
  k16GT = 4,
  k32GT = 5,
  k64GT = 6,
};
inline constexpr uint8_t kMaxLanes = 16;

// Why the port is not in L0 (or why it last left it). Closed list.
enum class LinkReason : uint8_t {
  kNone = 0,
  kPeerAbsent = 1,        // the peer's side of the region holds no link header
  kPeerSilent = 2,        // the peer's header is valid but its heartbeat does not advance
  kPeerIncompatible = 3,  // the peer's header has another version, the same side, or another geometry
  kPeerDisabled = 4,      // the peer is in Disabled
  kTrainingTimeout = 5,   // Polling/Configuration did not finish in training_timeout_ns
  kNoCommonLanes = 6,     // no lane is good on both ends
  kRecoveryTimeout = 7,   // Recovery did not finish in recovery_timeout_ns
  kPeerReset = 8,         // the peer restarted training (or re-attached) while the link was up
  kForcedDown = 9,        // force_down()
  kDisabled = 10,         // disable()
};

// Why the port last entered Recovery. Closed list.
enum class RecoveryCause : uint8_t {
  kNone = 0,
  kErrorBurst = 1,      // burst_errors errors within burst_window_ns
  kRequested = 2,       // retrain() or exit_loopback()
  kPeerRequest = 3,     // the peer sent TS1 from Recovery
  kLaneChange = 4,      // set_lane_good() changed the usable lanes
  kReplayRollover = 5,  // max_replays replays without progress
  kPeerSilent = 6,      // the peer's heartbeat stopped while up
  kL1Exit = 7,          // traffic while in L1
};

// Result of a Port call. Closed list.
enum class LinkStatus : uint32_t {
  kOk = 0,
  kDown = 1,         // the link is not up (see reason())
  kFull = 2,         // send: the replay buffer (or, in Loopback, the transport) has no room
  kEmpty = 3,        // receive: nothing waiting
  kTooLarge = 4,     // payload above max_payload / buffer smaller than the frame
  kBadArgument = 5,  // invalid configuration, lane number or storage
  kBadState = 6,     // not allowed in the current state
};

[[nodiscard]] const char* to_string(LinkState s);
[[nodiscard]] const char* to_string(LinkSpeed s);
[[nodiscard]] const char* to_string(LinkReason r);
[[nodiscard]] const char* to_string(RecoveryCause c);
[[nodiscard]] const char* to_string(LinkStatus s);
// Transfers per second in millions (2.5 GT/s -> 2500).
[[nodiscard]] uint32_t speed_mtps(LinkSpeed s);
// The fastest speed not above a board's vtrn,max-speed-gtps (GT/s per lane).
[[nodiscard]] LinkSpeed speed_from_gtps(uint32_t gtps);

// Modeled payload bandwidth in bytes per microsecond (= MB/s) after line
// coding: 8b/10b up to 5 GT/s, 128b/130b above.
[[nodiscard]] uint64_t link_bytes_per_us(LinkSpeed s, uint32_t width);
// The width two ends train to: the largest of 1, 2, 4, 8, 16 not above the
// number of lanes good on both ends (lane i meets lane i) and both caps; 0
// when no lane is common.
[[nodiscard]] uint32_t negotiate_width(uint32_t good_a, uint32_t cap_a, uint32_t good_b,
                                       uint32_t cap_b);

// What this end of the link can do (from the board description).
struct Capabilities {
  LinkSpeed max_speed = LinkSpeed::k8GT;  // every lower speed is supported too
  uint8_t lanes = 4;                      // 1..kMaxLanes
  uint32_t good_lanes = 0xF;              // bit i: lane i works (bits >= lanes are ignored)
};

struct Config {
  uint32_t max_payload = 4096;     // data bytes per frame
  uint32_t replay_frames = 16;     // frames sent but not yet acknowledged
  uint32_t rx_frames = 16;         // frames received but not yet read by receive()
  uint32_t frames_per_poll = 32;   // frames handled per poll, each direction
  bool model_bandwidth = true;     // pace data frames to the negotiated speed x width
  uint64_t peer_timeout_ns = 20'000'000;      // heartbeat silence that means the peer is gone
  uint64_t ts_interval_ns = 50'000;           // training set repeat period
  uint64_t training_timeout_ns = 24'000'000;  // Polling + Configuration
  uint64_t recovery_timeout_ns = 24'000'000;
  uint64_t detect_quiet_ns = 1'000'000;       // pause in Detect after a failed attempt
  uint64_t replay_timeout_ns = 1'000'000;     // no ACK progress -> replay
  uint64_t ack_refresh_ns = 200'000;          // re-advertise ACK/credit this often in L0
  uint32_t max_replays = 4;                   // replays without progress -> Recovery
  uint32_t burst_errors = 8;                  // this many errors ...
  uint64_t burst_window_ns = 1'000'000;       // ... within this window -> Recovery
  uint64_t retrain_fail_window_ns = 10'000'000;  // a burst this soon after a retrain: it failed
  uint32_t downgrade_after = 2;               // consecutive failed retrains per downgrade step
  uint64_t l0s_idle_ns = 0;                   // idle before L0s; 0 = never
  uint64_t l1_idle_ns = 0;                    // idle before L1; 0 = never
};

// The one timing of links between vtrn chips (a chip's ports, vtrnd's
// switch ports): much longer than Config's defaults, because the time here
// is the guest's wall clock under TCG on an oversubscribed host. A chip's
// vCPU can be descheduled for a good fraction of a second when tens of
// QEMUs share two cores, and that must not look like a dead peer; training
// still completes in a few polls when both ends get to run.
struct ChipTiming {
  uint64_t peer_timeout_ns = 1'500'000'000;
  uint64_t ts_interval_ns = 1'000'000;
  uint64_t training_timeout_ns = 3'000'000'000;
  uint64_t recovery_timeout_ns = 3'000'000'000;
  uint64_t detect_quiet_ns = 20'000'000;
  uint64_t replay_timeout_ns = 30'000'000;
  uint64_t ack_refresh_ns = 10'000'000;
  uint64_t burst_window_ns = 100'000'000;
  uint64_t retrain_fail_window_ns = 300'000'000;
  // How often the owner polls a port that is training or recovering (one
  // training set per poll) and one that is idle (Detect, or L0 with nothing
  // to send: the heartbeat). The board's link idle timers
  // (vtrn,l0s-idle-us, vtrn,l1-idle-us) are sized against the idle poll.
  uint64_t active_poll_ns = 1'000'000;
  uint64_t idle_poll_ns = 20'000'000;
};
inline constexpr ChipTiming kChipTiming{};

// `base` with kChipTiming's timeouts and intervals.
[[nodiscard]] constexpr Config with_chip_timing(Config base) {
  base.peer_timeout_ns = kChipTiming.peer_timeout_ns;
  base.ts_interval_ns = kChipTiming.ts_interval_ns;
  base.training_timeout_ns = kChipTiming.training_timeout_ns;
  base.recovery_timeout_ns = kChipTiming.recovery_timeout_ns;
  base.detect_quiet_ns = kChipTiming.detect_quiet_ns;
  base.replay_timeout_ns = kChipTiming.replay_timeout_ns;
  base.ack_refresh_ns = kChipTiming.ack_refresh_ns;
  base.burst_window_ns = kChipTiming.burst_window_ns;
  base.retrain_fail_window_ns = kChipTiming.retrain_fail_window_ns;
  return base;
}

struct Counters {
  LinkState state = LinkState::kDetect;
  LinkSpeed speed = LinkSpeed::kNone;  // negotiated, while trained
  uint8_t width = 0;
  LinkReason reason = LinkReason::kNone;       // why not up now (kNone in L0)
  LinkReason last_down = LinkReason::kNone;    // why the link last went down or failed training
  RecoveryCause last_recovery = RecoveryCause::kNone;
  uint64_t bandwidth_mbps = 0;  // modeled, for the negotiated speed x width
  uint64_t tx_bytes = 0, rx_bytes = 0;    // data payload, first transmission / delivered
  uint64_t tx_frames = 0, rx_frames = 0;
  uint64_t crc_errors = 0;
  uint64_t seq_errors = 0;        // data frame after a gap
  uint64_t naks_sent = 0, naks_received = 0;
  uint64_t replays = 0;           // replay events (NAK or timeout)
  uint64_t replayed_frames = 0;   // frames sent again
  uint64_t replay_timeouts = 0;
  uint64_t duplicates = 0;        // data frames received twice (dropped)
  uint64_t retrains = 0;          // Recovery entries except L1 exits
  uint64_t failed_retrains = 0;
  uint64_t downgrades = 0;
  uint64_t link_ups = 0, link_downs = 0;
  uint64_t l0s_entries = 0, l0s_exits = 0, l1_entries = 0, l1_exits = 0;
  uint64_t transport_errors = 0;  // index jumps and bad slot lengths
  uint64_t protocol_errors = 0;   // frames with a good CRC and impossible contents
  uint64_t tx_dropped = 0;        // accepted frames lost because the link went down
  uint64_t injected_bit_errors = 0;
  uint64_t ts_sent = 0, ts_received = 0;
  uint64_t time_in_state_ns[kLinkStateCount] = {};
};

// Frames on the wire (inside one transport frame), little-endian

enum FrameType : uint8_t {
  kFrameTs1 = 1,
  kFrameTs2 = 2,
  kFrameData = 3,
  kFrameAck = 4,       // seq = last in-order data frame received, credit = first seq not accepted
  kFrameNak = 5,       // same fields; also asks for a replay of everything after seq
  kFrameLoopback = 6,  // test payload, echoed by a Loopback slave
};

struct FrameHeader {
  uint8_t type;       // FrameType
  uint8_t flags;
  uint16_t reserved0;
  uint32_t length;    // payload bytes after the header
  uint32_t seq;
  uint32_t credit;
  uint32_t reserved1;
  uint32_t crc;       // crc32 of the header with crc = 0, then the payload
};
static_assert(sizeof(FrameHeader) == 24);

inline constexpr uint8_t kTsFlagLoopback = 1u << 0;

// The payload of TS1/TS2.
struct TrainingSet {
  uint8_t state;       // sender's LinkState
  uint8_t speed_cap;   // LinkSpeed the sender allows now (after downgrades)
  uint8_t width_cap;   // widest width the sender allows now
  uint8_t lanes;
  uint32_t good_lanes;
  uint32_t rx_credits;  // receive frames the sender holds for a new session
  uint8_t neg_speed;    // TS2: what the sender computed
  uint8_t neg_width;
  uint8_t flags;        // kTsFlag*
  uint8_t reserved;
};
static_assert(sizeof(TrainingSet) == 16);

class Port {
 public:
  Port() = default;
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  // Bytes of storage init() needs for `cfg`.
  [[nodiscard]] static size_t storage_bytes(const Config& cfg);
  // Binds the port to a transport whose max_frame() holds a full frame
  // (sizeof(FrameHeader) + max_payload). `storage` (8-byte aligned) must
  // outlive the port. Starts in Detect.
  [[nodiscard]] LinkStatus init(Transport* transport, const Capabilities& caps, const Config& cfg,
                                uint8_t* storage, size_t storage_len, uint64_t now_ns);

  // Advances the state machine and moves at most cfg.frames_per_poll frames
  // each way. Never blocks.
  void poll(uint64_t now_ns);

  // Queues one frame for delivery in order (copied; kept until acknowledged).
  // Allowed while up or retraining (L0, L0s, L1, Recovery); in Loopback
  // (master) the frame goes out unsequenced and comes back to receive().
  [[nodiscard]] LinkStatus send(const void* data, uint32_t length);
  // Pops the oldest delivered frame.
  [[nodiscard]] LinkStatus receive(void* buf, uint32_t capacity, uint32_t* length);
  // The oldest delivered frame in place (valid until discard() or the next
  // poll()), so a user can look at it, use it without a copy, or leave it
  // queued: a frame left there keeps its receive credit, so the sender is
  // held back instead of the frame being lost.
  [[nodiscard]] LinkStatus peek(const uint8_t** data, uint32_t* length) const;
  // Pops the oldest delivered frame without copying it.
  [[nodiscard]] LinkStatus discard();
  // Frames queued by send() and not yet acknowledged.
  [[nodiscard]] uint32_t tx_outstanding() const { return next_seq_ - acked_; }
  [[nodiscard]] uint32_t tx_space() const { return cfg_.replay_frames - tx_outstanding(); }
  [[nodiscard]] uint32_t rx_pending() const { return rx_tail_ - rx_head_; }

  // Management (the `vtrn link` commands).
  void retrain();
  void force_down();
  void disable();
  void enable();
  [[nodiscard]] LinkStatus set_lane_good(uint32_t lane, bool good);
  // Bit-error rate applied to every frame this end transmits; 0 turns it off.
  void inject_ber(double rate, uint64_t seed);
  [[nodiscard]] LinkStatus enter_loopback();
  [[nodiscard]] LinkStatus exit_loopback();
  // Forgets downgrades: the next training uses the full capabilities again.
  void restore_capabilities();

  [[nodiscard]] LinkState state() const { return state_; }
  [[nodiscard]] bool up() const;
  [[nodiscard]] LinkSpeed speed() const { return speed_; }
  [[nodiscard]] uint32_t width() const { return width_; }
  [[nodiscard]] LinkReason reason() const { return reason_; }
  [[nodiscard]] uint32_t max_payload() const { return cfg_.max_payload; }
  [[nodiscard]] bool loopback_master() const { return loopback_master_; }
  // Counters with time_in_state_ns brought up to the last poll.
  [[nodiscard]] Counters counters() const;

 private:
  // State machine.
  void set_state(LinkState s);
  void go_down(LinkReason why, bool quiet);
  void enter_polling();
  void enter_configuration();
  void enter_l0(bool new_session);
  void enter_recovery(RecoveryCause cause);
  void update_presence();
  [[nodiscard]] bool peer_live() const;
  [[nodiscard]] LinkReason absent_reason() const;
  void error_event();
  void retrain_failed();
  bool renegotiate();
  bool renegotiate_keeping_ts2();
  void poll_detect();
  void poll_training();
  void poll_up();
  void poll_loopback();
  // Frames.
  void receive_frames();
  void handle_frame(const uint8_t* frame, uint32_t length);
  void handle_ts(const FrameHeader& h, const TrainingSet& ts);
  void handle_data(const FrameHeader& h, uint8_t* frame);
  void handle_ack(const FrameHeader& h, bool nak);
  bool send_ts(uint8_t type, LinkState as);
  bool send_control(uint8_t type);
  void transmit_data();
  void start_replay();
  bool put_frame(const uint8_t* frame, uint32_t length);
  void corrupt(uint8_t* frame, uint32_t length);
  uint64_t next_error_gap();
  void dll_reset();
  [[nodiscard]] uint32_t credit_limit() const;
  [[nodiscard]] uint8_t* replay_slot(uint32_t seq) const;
  [[nodiscard]] uint8_t* rx_slot(uint32_t index) const;
  [[nodiscard]] uint32_t frame_bytes() const { return uint32_t(sizeof(FrameHeader)) + cfg_.max_payload; }
  [[nodiscard]] TrainingSet my_ts(uint8_t flags) const;

  Transport* t_ = nullptr;
  Capabilities caps_{};
  Config cfg_{};
  uint8_t* replay_ = nullptr;   // replay_frames x frame_bytes()
  uint8_t* rxq_ = nullptr;      // rx_frames x frame_bytes()
  uint8_t* scratch_ = nullptr;  // one frame

  uint64_t now_ = 0;
  uint64_t state_since_ = 0;
  LinkState state_ = LinkState::kDetect;
  LinkReason reason_ = LinkReason::kPeerAbsent;
  Counters c_{};

  // Peer presence.
  PeerView peer_{};
  bool hb_sampled_ = false;
  bool hb_advanced_ = false;
  uint64_t hb_last_ = 0;
  uint64_t hb_change_ns_ = 0;
  uint32_t peer_epoch_ = 0;
  bool epoch_known_ = false;

  // Training.
  uint64_t deadline_ = 0;
  uint64_t quiet_until_ = 0;
  uint64_t next_ts_ = 0;
  uint32_t ts_rx_ = 0;
  uint32_t ts2_sent_ = 0;
  bool got_ts2_ = false;
  bool rec_cfg_ = false;  // Recovery: peer heard, sending TS2
  TrainingSet peer_ts_{};
  LinkSpeed speed_cap_ = LinkSpeed::kNone;
  uint32_t width_cap_ = kMaxLanes;
  LinkSpeed speed_ = LinkSpeed::kNone;
  uint32_t width_ = 0;
  LinkSpeed neg_speed_ = LinkSpeed::kNone;
  uint32_t neg_width_ = 0;
  bool retrain_req_ = false;
  bool lanes_changed_ = false;
  bool disabled_ = false;
  bool last_l0_from_recovery_ = false;
  uint64_t l0_since_ = 0;
  uint32_t consecutive_failures_ = 0;
  uint64_t burst_start_ = 0;
  uint32_t burst_count_ = 0;
  uint64_t last_activity_ = 0;  // data sent, received or queued
  uint8_t last_ts2_state_ = 0;
  bool loopback_master_ = false;
  bool loopback_echo_seen_ = false;

  // Data link layer, transmit side (sequence numbers are serial, 32-bit).
  uint32_t next_seq_ = 0;  // next sequence number send() assigns
  uint32_t next_tx_ = 0;   // next one to put on the wire
  uint32_t acked_ = 0;     // oldest unacknowledged
  uint32_t high_tx_ = 0;   // one past the highest ever transmitted
  uint32_t peer_credit_ = 0;
  uint32_t replay_num_ = 0;
  uint64_t progress_ns_ = 0;  // last ACK progress or replay start
  // Receive side.
  uint32_t expected_ = 0;
  uint32_t rx_head_ = 0, rx_tail_ = 0;
  bool nak_pending_ = false;  // a NAK went out; drop out-of-order frames quietly until the gap fills
  bool send_nak_ = false;
  bool ack_pending_ = false;
  uint32_t credit_sent_ = 0;
  uint64_t ack_sent_ns_ = 0;

  // Bandwidth model.
  int64_t tokens_ = 0;
  uint64_t tokens_ns_ = 0;
  uint64_t rate_ = 0;  // bytes per microsecond

  // Error injection.
  double ber_ = 0;
  uint64_t rng_ = 0;
  uint64_t bits_to_error_ = 0;
};

// Storage for one port, sized at compile time (firmware statics).
template <uint32_t kMaxPayload, uint32_t kReplayFrames, uint32_t kRxFrames>
struct PortStorage {
  alignas(8) uint8_t bytes[(kReplayFrames + kRxFrames + 1) * (sizeof(FrameHeader) + kMaxPayload)];
};

}  // namespace vtrn::link
