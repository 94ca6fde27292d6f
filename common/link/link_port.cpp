// The link port: LTSSM, data link layer, power states, error injection and
// counters (API and model in vtrn/link.h).
//
// Training correctness rests on one property of the transport: frames arrive
// in the order they were sent. Each state sends one kind of training set
// (Polling TS1, Configuration TS2, Recovery TS1 then TS2), and a port only
// leaves a training state after it has sent its own TS2 and received the
// peer's, so every training set the peer sent before that is read before any
// data, and a TS1 that reaches an up port is always a new request, never an
// old one. Training sets say which state sent them: a "fresh" one (Polling,
// Configuration) starts a new session and resets sequence numbers, a Recovery
// one keeps them; a port never mixes the two, or the two ends would disagree
// about which frames were delivered.
//
// Headers are copied with memcpy (the firmware builds with -mstrict-align and
// frame offsets are not always aligned). Sequence numbers and credits are
// compared as serial numbers (int32 differences).
#include "vtrn/link.h"

#include <string.h>

#include <new>

#include "vtrn/crc32.h"

namespace vtrn::link {
namespace {

int32_t serial_diff(uint32_t a, uint32_t b) { return int32_t(a - b); }

uint32_t popcount(uint32_t v) {
  uint32_t n = 0;
  for (; v != 0; v &= v - 1) ++n;
  return n;
}

uint32_t floor_pow2_width(uint32_t n) {
  uint32_t w = 0;
  for (uint32_t c = 1; c <= kMaxLanes; c <<= 1) {
    if (c <= n) w = c;
  }
  return w;
}

uint32_t lane_mask(uint32_t lanes) { return lanes >= 32 ? 0xFFFFFFFFu : (1u << lanes) - 1; }

// The frame CRC is the per-byte cost of the data path, twice per frame.
// AArch64 cores with the CRC extension (the Cortex-A53 has it, and QEMU's
// model implements it as one helper call per 8 bytes) compute the same
// CRC-32 (reflected 0x04C11DB7 = zlib's 0xEDB88320) several times faster
// under TCG than the slicing table; the result is identical, so a host test
// peer and a firmware peer interoperate.
#if defined(__ARM_FEATURE_CRC32)
uint32_t link_crc32(const void* data, size_t length, uint32_t crc = 0) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (length > 0 && (uintptr_t(p) & 7) != 0) {
    c = __builtin_aarch64_crc32b(c, *p++);
    --length;
  }
  // Aligned 8-byte loads only (-mstrict-align).
  const auto* q = static_cast<const uint64_t*>(__builtin_assume_aligned(p, 8));
  for (; length >= 8; length -= 8) c = __builtin_aarch64_crc32x(c, *q++);
  p = reinterpret_cast<const uint8_t*>(q);
  while (length-- > 0) c = __builtin_aarch64_crc32b(c, *p++);
  return ~c;
}
#else
uint32_t link_crc32(const void* data, size_t length, uint32_t crc = 0) {
  return crc32(data, length, crc);
}
#endif

uint32_t frame_crc(const FrameHeader& h, const uint8_t* payload, uint32_t length) {
  FrameHeader z = h;
  z.crc = 0;
  const uint32_t c = link_crc32(&z, sizeof(z));
  return length == 0 ? c : link_crc32(payload, length, c);
}

// Natural logarithm for 0 < x <= 1 without libm (the firmware links none):
// x = m * 2^e with m in [1, 2), ln m = 2 atanh((m - 1) / (m + 1)).
double ln(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof(bits));
  const int e = int((bits >> 52) & 0x7FF) - 1023;
  bits = (bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;
  double m;
  memcpy(&m, &bits, sizeof(m));
  const double z = (m - 1) / (m + 1);
  const double z2 = z * z;
  double term = z, sum = 0;
  for (int k = 1; k < 40; k += 2) {
    sum += term / k;
    term *= z2;
  }
  return 2 * sum + e * 0.6931471805599453;
}

uint64_t xorshift(uint64_t* s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

bool is_fresh(uint8_t s) {
  return s == uint8_t(LinkState::kPolling) || s == uint8_t(LinkState::kConfiguration);
}

}  // namespace

const char* to_string(LinkState s) {
  switch (s) {
    case LinkState::kDetect: return "Detect";
    case LinkState::kPolling: return "Polling";
    case LinkState::kConfiguration: return "Configuration";
    case LinkState::kL0: return "L0";
    case LinkState::kRecovery: return "Recovery";
    case LinkState::kL0s: return "L0s";
    case LinkState::kL1: return "L1";
    case LinkState::kDisabled: return "Disabled";
    case LinkState::kLoopback: return "Loopback";
  }
  return "?";
}

const char* to_string(LinkSpeed s) {
  switch (s) {
    case LinkSpeed::kNone: return "-";
    case LinkSpeed::k2_5GT: return "2.5GT/s";
    case LinkSpeed::k5GT: return "5GT/s";
    case LinkSpeed::k8GT: return "8GT/s";
    case LinkSpeed::k16GT: return "16GT/s";
    case LinkSpeed::k32GT: return "32GT/s";
    case LinkSpeed::k64GT: return "64GT/s";
  }
  return "?";
}

const char* to_string(LinkReason r) {
  switch (r) {
    case LinkReason::kNone: return "none";
    case LinkReason::kPeerAbsent: return "peer absent (no link header)";
    case LinkReason::kPeerSilent: return "peer silent (heartbeat stopped)";
    case LinkReason::kPeerIncompatible: return "peer incompatible (version, side or geometry)";
    case LinkReason::kPeerDisabled: return "peer disabled";
    case LinkReason::kTrainingTimeout: return "training timeout";
    case LinkReason::kNoCommonLanes: return "no common good lanes";
    case LinkReason::kRecoveryTimeout: return "recovery timeout";
    case LinkReason::kPeerReset: return "peer restarted training";
    case LinkReason::kForcedDown: return "forced down";
    case LinkReason::kDisabled: return "disabled";
  }
  return "?";
}

const char* to_string(RecoveryCause c) {
  switch (c) {
    case RecoveryCause::kNone: return "none";
    case RecoveryCause::kErrorBurst: return "error burst";
    case RecoveryCause::kRequested: return "requested";
    case RecoveryCause::kPeerRequest: return "peer request";
    case RecoveryCause::kLaneChange: return "lane change";
    case RecoveryCause::kReplayRollover: return "replay rollover";
    case RecoveryCause::kPeerSilent: return "peer silent";
    case RecoveryCause::kL1Exit: return "L1 exit";
  }
  return "?";
}

const char* to_string(LinkStatus s) {
  switch (s) {
    case LinkStatus::kOk: return "ok";
    case LinkStatus::kDown: return "link down";
    case LinkStatus::kFull: return "full";
    case LinkStatus::kEmpty: return "empty";
    case LinkStatus::kTooLarge: return "too large";
    case LinkStatus::kBadArgument: return "bad argument";
    case LinkStatus::kBadState: return "bad state";
  }
  return "?";
}

uint32_t speed_mtps(LinkSpeed s) {
  switch (s) {
    case LinkSpeed::kNone: return 0;
    case LinkSpeed::k2_5GT: return 2500;
    case LinkSpeed::k5GT: return 5000;
    case LinkSpeed::k8GT: return 8000;
    case LinkSpeed::k16GT: return 16000;
    case LinkSpeed::k32GT: return 32000;
    case LinkSpeed::k64GT: return 64000;
  }
  return 0;
}

LinkSpeed speed_from_gtps(uint32_t g) {
  if (g >= 64) return LinkSpeed::k64GT;
  if (g >= 32) return LinkSpeed::k32GT;
  if (g >= 16) return LinkSpeed::k16GT;
  if (g >= 8) return LinkSpeed::k8GT;
  if (g >= 5) return LinkSpeed::k5GT;
  return LinkSpeed::k2_5GT;
}

uint64_t link_bytes_per_us(LinkSpeed s, uint32_t width) {
  const uint64_t mt = speed_mtps(s);
  if (s <= LinkSpeed::k5GT) return mt * width * 8 / (10 * 8);
  return mt * width * 128 / (130 * 8);
}

uint32_t negotiate_width(uint32_t good_a, uint32_t cap_a, uint32_t good_b, uint32_t cap_b) {
  uint32_t w = floor_pow2_width(popcount(good_a & good_b));
  while (w > cap_a || w > cap_b) w >>= 1;
  return w;
}

// ---------------------------------------------------------------------------
// Setup and management

size_t Port::storage_bytes(const Config& cfg) {
  return size_t(cfg.replay_frames + cfg.rx_frames + 1) * (sizeof(FrameHeader) + cfg.max_payload);
}

LinkStatus Port::init(Transport* transport, const Capabilities& caps, const Config& cfg,
                      uint8_t* storage, size_t storage_len, uint64_t now_ns) {
  if (transport == nullptr || storage == nullptr || (uintptr_t(storage) & 7) != 0) {
    return LinkStatus::kBadArgument;
  }
  if (caps.lanes == 0 || caps.lanes > kMaxLanes || caps.max_speed == LinkSpeed::kNone ||
      caps.max_speed > LinkSpeed::k64GT) {
    return LinkStatus::kBadArgument;
  }
  if (cfg.max_payload == 0 || cfg.replay_frames == 0 || cfg.rx_frames == 0 ||
      cfg.frames_per_poll == 0 || cfg.burst_errors == 0 || cfg.downgrade_after == 0 ||
      storage_len < storage_bytes(cfg) ||
      transport->max_frame() < sizeof(FrameHeader) + cfg.max_payload ||
      cfg.replay_frames > 0x40000000u || cfg.rx_frames > 0x40000000u) {
    return LinkStatus::kBadArgument;
  }
  // Port is non-copyable; a fresh object in place resets every field.
  this->~Port();
  new (this) Port();
  t_ = transport;
  caps_ = caps;
  caps_.good_lanes &= lane_mask(caps.lanes);
  cfg_ = cfg;
  replay_ = storage;
  rxq_ = replay_ + size_t(cfg.replay_frames) * frame_bytes();
  scratch_ = rxq_ + size_t(cfg.rx_frames) * frame_bytes();
  speed_cap_ = caps.max_speed;
  width_cap_ = kMaxLanes;
  now_ = now_ns;
  state_since_ = now_ns;
  state_ = LinkState::kDetect;
  reason_ = LinkReason::kPeerAbsent;
  return LinkStatus::kOk;
}

bool Port::up() const {
  return state_ == LinkState::kL0 || state_ == LinkState::kL0s || state_ == LinkState::kL1;
}

void Port::retrain() {
  // A link that is not up trains from scratch anyway; a request kept until
  // then would retrain it again right after.
  if (up()) retrain_req_ = true;
}

void Port::force_down() {
  if (t_ != nullptr && state_ != LinkState::kDisabled) go_down(LinkReason::kForcedDown, true);
}

void Port::disable() {
  if (t_ == nullptr || state_ == LinkState::kDisabled) return;
  go_down(LinkReason::kDisabled, false);
  disabled_ = true;
  set_state(LinkState::kDisabled);
  t_->publish(LocalInfo{uint32_t(state_)});
}

void Port::enable() {
  if (!disabled_) return;
  disabled_ = false;
  set_state(LinkState::kDetect);
}

LinkStatus Port::set_lane_good(uint32_t lane, bool good) {
  if (lane >= caps_.lanes) return LinkStatus::kBadArgument;
  const uint32_t before = caps_.good_lanes;
  if (good) {
    caps_.good_lanes |= 1u << lane;
  } else {
    caps_.good_lanes &= ~(1u << lane);
  }
  if (caps_.good_lanes != before) lanes_changed_ = true;
  return LinkStatus::kOk;
}

void Port::inject_ber(double rate, uint64_t seed) {
  ber_ = rate > 0 ? (rate > 1 ? 1 : rate) : 0;
  // splitmix64 of the seed: any seed (even 0) gives a usable xorshift state.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  rng_ = (z ^ (z >> 31)) | 1;
  if (ber_ > 0) bits_to_error_ = next_error_gap();
}

LinkStatus Port::enter_loopback() {
  if (state_ != LinkState::kL0 && state_ != LinkState::kL0s) return LinkStatus::kBadState;
  loopback_master_ = true;
  loopback_echo_seen_ = false;
  next_ts_ = now_;
  set_state(LinkState::kLoopback);
  return LinkStatus::kOk;
}

LinkStatus Port::exit_loopback() {
  if (state_ != LinkState::kLoopback || !loopback_master_) return LinkStatus::kBadState;
  loopback_master_ = false;
  enter_recovery(RecoveryCause::kRequested);
  return LinkStatus::kOk;
}

void Port::restore_capabilities() {
  speed_cap_ = caps_.max_speed;
  width_cap_ = kMaxLanes;
  consecutive_failures_ = 0;
}

Counters Port::counters() const {
  Counters c = c_;
  c.state = state_;
  c.speed = speed_;
  c.width = uint8_t(width_);
  c.reason = reason_;
  c.bandwidth_mbps = link_bytes_per_us(speed_, width_);
  c.time_in_state_ns[uint32_t(state_)] += now_ - state_since_;
  return c;
}

// ---------------------------------------------------------------------------
// Data path, application side

LinkStatus Port::send(const void* data, uint32_t length) {
  if (t_ == nullptr) return LinkStatus::kBadState;
  if (length > cfg_.max_payload) return LinkStatus::kTooLarge;
  if (state_ == LinkState::kLoopback) {
    if (!loopback_master_) return LinkStatus::kBadState;
    FrameHeader h{kFrameLoopback, 0, 0, length, 0, 0, 0, 0};
    h.crc = frame_crc(h, static_cast<const uint8_t*>(data), length);
    memcpy(scratch_, &h, sizeof(h));
    memcpy(scratch_ + sizeof(h), data, length);
    if (!put_frame(scratch_, uint32_t(sizeof(h)) + length)) return LinkStatus::kFull;
    c_.tx_frames++;
    c_.tx_bytes += length;
    return LinkStatus::kOk;
  }
  if (!up() && state_ != LinkState::kRecovery) return LinkStatus::kDown;
  if (tx_outstanding() >= cfg_.replay_frames) return LinkStatus::kFull;
  FrameHeader h{kFrameData, 0, 0, length, next_seq_, 0, 0, 0};
  h.crc = frame_crc(h, static_cast<const uint8_t*>(data), length);
  uint8_t* slot = replay_slot(next_seq_);
  memcpy(slot, &h, sizeof(h));
  memcpy(slot + sizeof(h), data, length);
  ++next_seq_;
  last_activity_ = now_;
  return LinkStatus::kOk;
}

LinkStatus Port::receive(void* buf, uint32_t capacity, uint32_t* length) {
  *length = 0;
  if (rx_head_ == rx_tail_) return LinkStatus::kEmpty;
  const uint8_t* slot = rx_slot(rx_head_);
  FrameHeader h;
  memcpy(&h, slot, sizeof(h));
  if (h.length > capacity) return LinkStatus::kTooLarge;
  memcpy(buf, slot + sizeof(h), h.length);
  *length = h.length;
  ++rx_head_;
  return LinkStatus::kOk;
}

LinkStatus Port::peek(const uint8_t** data, uint32_t* length) const {
  *data = nullptr;
  *length = 0;
  if (rx_head_ == rx_tail_) return LinkStatus::kEmpty;
  const uint8_t* slot = rx_slot(rx_head_);
  FrameHeader h;
  memcpy(&h, slot, sizeof(h));
  *data = slot + sizeof(h);
  *length = h.length;
  return LinkStatus::kOk;
}

LinkStatus Port::discard() {
  if (rx_head_ == rx_tail_) return LinkStatus::kEmpty;
  ++rx_head_;
  return LinkStatus::kOk;
}

uint8_t* Port::replay_slot(uint32_t seq) const {
  return replay_ + size_t(seq % cfg_.replay_frames) * frame_bytes();
}

uint8_t* Port::rx_slot(uint32_t index) const {
  return rxq_ + size_t(index % cfg_.rx_frames) * frame_bytes();
}

uint32_t Port::credit_limit() const { return expected_ + (cfg_.rx_frames - rx_pending()); }

// ---------------------------------------------------------------------------
// The step function

void Port::poll(uint64_t now_ns) {
  if (t_ == nullptr) return;
  if (now_ns < now_) now_ns = now_;  // a clock that steps back is held, not trusted
  now_ = now_ns;
  update_presence();
  switch (state_) {
    case LinkState::kDetect: poll_detect(); break;
    case LinkState::kPolling:
    case LinkState::kConfiguration:
    case LinkState::kRecovery: poll_training(); break;
    case LinkState::kL0:
    case LinkState::kL0s:
    case LinkState::kL1: poll_up(); break;
    case LinkState::kLoopback: poll_loopback(); break;
    case LinkState::kDisabled: t_->rx_flush(); break;
  }
  // Published last, so the peer sees the state this poll ended in.
  t_->publish(LocalInfo{uint32_t(state_)});
}

void Port::set_state(LinkState s) {
  c_.time_in_state_ns[uint32_t(state_)] += now_ - state_since_;
  state_since_ = now_;
  state_ = s;
}

void Port::update_presence() {
  peer_ = t_->peer();
  if (peer_.fault != PeerFault::kNone) {
    hb_sampled_ = false;
    hb_advanced_ = false;
    return;
  }
  if (!hb_sampled_) {
    hb_sampled_ = true;
    hb_last_ = peer_.heartbeat;
    hb_change_ns_ = now_;
  } else if (peer_.heartbeat != hb_last_) {
    hb_last_ = peer_.heartbeat;
    hb_change_ns_ = now_;
    hb_advanced_ = true;
  }
  // A peer that attached again lost its half of the session.
  if (epoch_known_ && peer_.epoch != peer_epoch_ && state_ != LinkState::kDetect &&
      state_ != LinkState::kDisabled) {
    peer_epoch_ = peer_.epoch;
    go_down(LinkReason::kPeerReset, false);
    return;
  }
  peer_epoch_ = peer_.epoch;
  epoch_known_ = true;
}

bool Port::peer_live() const {
  return peer_.fault == PeerFault::kNone && hb_advanced_ &&
         now_ - hb_change_ns_ <= cfg_.peer_timeout_ns &&
         peer_.state != uint32_t(LinkState::kDisabled);
}

LinkReason Port::absent_reason() const {
  switch (peer_.fault) {
    case PeerFault::kNone: break;
    case PeerFault::kNoHeader: return LinkReason::kPeerAbsent;
    default: return LinkReason::kPeerIncompatible;
  }
  if (peer_.state == uint32_t(LinkState::kDisabled)) return LinkReason::kPeerDisabled;
  return LinkReason::kPeerSilent;
}

void Port::go_down(LinkReason why, bool quiet) {
  const bool was_up = up() || state_ == LinkState::kRecovery || state_ == LinkState::kLoopback;
  if (was_up) c_.link_downs++;
  c_.last_down = why;
  reason_ = why;
  dll_reset();
  t_->rx_flush();
  loopback_master_ = false;
  speed_ = LinkSpeed::kNone;
  width_ = 0;
  quiet_until_ = quiet ? now_ + cfg_.detect_quiet_ns : now_;
  epoch_known_ = false;
  set_state(LinkState::kDetect);
}

void Port::dll_reset() {
  c_.tx_dropped += next_seq_ - acked_;
  next_seq_ = next_tx_ = acked_ = high_tx_ = 0;
  peer_credit_ = 0;
  replay_num_ = 0;
  expected_ = 0;
  nak_pending_ = send_nak_ = ack_pending_ = false;
  credit_sent_ = 0;
}

// ---------------------------------------------------------------------------
// Training

void Port::poll_detect() {
  // Whatever the peer sent before we were looking belongs to no session.
  t_->rx_flush();
  if (now_ < quiet_until_) return;
  if (!peer_live()) {
    reason_ = absent_reason();
    return;
  }
  enter_polling();
}

void Port::enter_polling() {
  ts_rx_ = 0;
  ts2_sent_ = 0;
  deadline_ = now_ + cfg_.training_timeout_ns;
  next_ts_ = now_;
  set_state(LinkState::kPolling);
}

void Port::enter_configuration() {
  got_ts2_ = false;
  ts2_sent_ = 0;
  next_ts_ = now_;
  set_state(LinkState::kConfiguration);
}

bool Port::renegotiate_keeping_ts2() {
  const LinkSpeed s = neg_speed_;
  const uint32_t w = neg_width_;
  if (!renegotiate()) {
    go_down(LinkReason::kNoCommonLanes, true);
    return false;
  }
  if (s != neg_speed_ || w != neg_width_) got_ts2_ = false;  // a TS2 for other values no longer counts
  return true;
}

bool Port::renegotiate() {
  const auto peer_speed = LinkSpeed(peer_ts_.speed_cap);
  neg_speed_ = speed_cap_ < peer_speed ? speed_cap_ : peer_speed;
  const uint32_t my_cap = width_cap_ < caps_.lanes ? width_cap_ : caps_.lanes;
  const uint32_t peer_cap = peer_ts_.width_cap < peer_ts_.lanes ? peer_ts_.width_cap : peer_ts_.lanes;
  neg_width_ = negotiate_width(caps_.good_lanes, my_cap, peer_ts_.good_lanes, peer_cap);
  return neg_width_ != 0;
}

TrainingSet Port::my_ts(uint8_t flags) const {
  TrainingSet ts{};
  ts.state = uint8_t(state_);
  ts.speed_cap = uint8_t(speed_cap_);
  ts.width_cap = uint8_t(width_cap_);
  ts.lanes = caps_.lanes;
  ts.good_lanes = caps_.good_lanes;
  ts.rx_credits = cfg_.rx_frames;
  ts.neg_speed = uint8_t(neg_speed_);
  ts.neg_width = uint8_t(neg_width_);
  ts.flags = flags;
  return ts;
}

bool Port::send_ts(uint8_t type, LinkState as) {
  const uint8_t flags = (as == LinkState::kLoopback && loopback_master_) ? kTsFlagLoopback : 0;
  TrainingSet ts = my_ts(flags);
  ts.state = uint8_t(as);
  FrameHeader h{type, 0, 0, uint32_t(sizeof(ts)), 0, 0, 0, 0};
  h.crc = frame_crc(h, reinterpret_cast<const uint8_t*>(&ts), sizeof(ts));
  uint8_t buf[sizeof(FrameHeader) + sizeof(TrainingSet)];
  memcpy(buf, &h, sizeof(h));
  memcpy(buf + sizeof(h), &ts, sizeof(ts));
  if (!put_frame(buf, sizeof(buf))) return false;
  c_.ts_sent++;
  if (type == kFrameTs2) last_ts2_state_ = ts.state;
  return true;
}

void Port::enter_recovery(RecoveryCause cause) {
  c_.last_recovery = cause;
  if (cause == RecoveryCause::kL1Exit) {
    c_.l1_exits++;
  } else {
    c_.retrains++;
  }
  rec_cfg_ = false;
  got_ts2_ = false;
  ts2_sent_ = 0;
  deadline_ = now_ + cfg_.recovery_timeout_ns;
  next_ts_ = now_;
  lanes_changed_ = false;
  set_state(LinkState::kRecovery);
}

void Port::poll_training() {
  receive_frames();
  if (state_ != LinkState::kPolling && state_ != LinkState::kConfiguration &&
      state_ != LinkState::kRecovery) {
    return;  // a frame moved us (down, or up after the last TS2)
  }
  if (!peer_live()) {
    if (state_ == LinkState::kRecovery) {
      // Keep trying until the recovery deadline: a peer that is only slow
      // to poll may come back.
      if (now_ >= deadline_) go_down(absent_reason(), true);
      return;
    }
    go_down(absent_reason(), false);
    return;
  }
  if (now_ >= deadline_) {
    if (state_ == LinkState::kRecovery) {
      retrain_failed();
      go_down(LinkReason::kRecoveryTimeout, true);
    } else {
      go_down(LinkReason::kTrainingTimeout, true);
    }
    return;
  }
  if (now_ >= next_ts_) {
    const bool ts2 = state_ == LinkState::kConfiguration ||
                     (state_ == LinkState::kRecovery && rec_cfg_);
    if (send_ts(ts2 ? kFrameTs2 : kFrameTs1, state_)) {
      next_ts_ = now_ + cfg_.ts_interval_ns;
      if (ts2) ts2_sent_++;
    }
  }
  if (got_ts2_ && ts2_sent_ > 0) {
    enter_l0(state_ == LinkState::kConfiguration);
  }
}

void Port::enter_l0(bool new_session) {
  speed_ = neg_speed_;
  width_ = neg_width_;
  rate_ = link_bytes_per_us(speed_, width_);
  tokens_ = 0;
  tokens_ns_ = now_;
  if (new_session) {
    dll_reset();
    peer_credit_ = peer_ts_.rx_credits;
    c_.link_ups++;
    last_l0_from_recovery_ = false;
    consecutive_failures_ = 0;
  } else {
    last_l0_from_recovery_ = true;
    start_replay();  // anything lost during Recovery goes again; duplicates are dropped
  }
  reason_ = LinkReason::kNone;
  l0_since_ = now_;
  last_activity_ = now_;
  ack_pending_ = true;  // re-advertise the receive position and credit
  burst_count_ = 0;
  progress_ns_ = now_;
  set_state(LinkState::kL0);
}

void Port::retrain_failed() {
  c_.failed_retrains++;
  if (++consecutive_failures_ < cfg_.downgrade_after) return;
  consecutive_failures_ = 0;
  const LinkSpeed current = speed_ != LinkSpeed::kNone ? speed_ : neg_speed_;
  if (current > LinkSpeed::k2_5GT) {
    speed_cap_ = LinkSpeed(uint8_t(current) - 1);
    c_.downgrades++;
  } else {
    const uint32_t w = width_ != 0 ? width_ : neg_width_;
    if (w > 1) {
      width_cap_ = w / 2;
      c_.downgrades++;
    }
  }
}

void Port::error_event() {
  if (!up()) return;
  if (burst_count_ == 0 || now_ - burst_start_ > cfg_.burst_window_ns) {
    burst_start_ = now_;
    burst_count_ = 0;
  }
  if (++burst_count_ < cfg_.burst_errors) return;
  burst_count_ = 0;
  if (last_l0_from_recovery_ && now_ - l0_since_ < cfg_.retrain_fail_window_ns) retrain_failed();
  enter_recovery(RecoveryCause::kErrorBurst);
}

// ---------------------------------------------------------------------------
// Up: L0, L0s, L1

void Port::poll_up() {
  if (peer_.fault != PeerFault::kNone || peer_.state == uint32_t(LinkState::kDisabled)) {
    go_down(absent_reason(), false);
    return;
  }
  if (!peer_live()) {
    enter_recovery(RecoveryCause::kPeerSilent);
    return;
  }
  receive_frames();
  if (!up()) return;
  if (retrain_req_ || lanes_changed_) {
    const RecoveryCause cause = lanes_changed_ ? RecoveryCause::kLaneChange : RecoveryCause::kRequested;
    retrain_req_ = false;
    enter_recovery(cause);
    return;
  }
  const bool busy = next_tx_ != next_seq_ || ack_pending_ || send_nak_;
  if (state_ == LinkState::kL1 && (busy || last_activity_ > state_since_)) {
    enter_recovery(RecoveryCause::kL1Exit);
    return;
  }
  if (state_ == LinkState::kL0s && (busy || last_activity_ > state_since_)) {
    c_.l0s_exits++;
    set_state(LinkState::kL0);
  }
  if (last_l0_from_recovery_ && now_ - l0_since_ >= cfg_.retrain_fail_window_ns) {
    consecutive_failures_ = 0;  // the last retrain held
  }
  // Replay timer: outstanding frames and no ACK progress.
  if (acked_ != next_tx_ && now_ - progress_ns_ >= cfg_.replay_timeout_ns) {
    c_.replay_timeouts++;
    error_event();
    if (!up()) return;
    start_replay();
    if (!up()) return;
  }
  if (state_ == LinkState::kL0 && now_ - ack_sent_ns_ >= cfg_.ack_refresh_ns) ack_pending_ = true;
  if (send_nak_) {
    if (send_control(kFrameNak)) {
      send_nak_ = false;
      ack_pending_ = false;
      c_.naks_sent++;
    }
  } else if (ack_pending_ || serial_diff(credit_limit(), credit_sent_) > 0) {
    if (send_control(kFrameAck)) ack_pending_ = false;
  }
  transmit_data();
  // Power states on idle. L1 needs both ends idle: the peer says so in its header.
  const bool idle = acked_ == next_seq_ && rx_pending() == 0;
  const uint64_t quiet_for = now_ - last_activity_;
  if (state_ == LinkState::kL0 && idle && cfg_.l0s_idle_ns != 0 && quiet_for >= cfg_.l0s_idle_ns) {
    c_.l0s_entries++;
    set_state(LinkState::kL0s);
  }
  if ((state_ == LinkState::kL0s || state_ == LinkState::kL0) && idle && cfg_.l1_idle_ns != 0 &&
      quiet_for >= cfg_.l1_idle_ns &&
      (peer_.state == uint32_t(LinkState::kL0s) || peer_.state == uint32_t(LinkState::kL1))) {
    c_.l1_entries++;
    set_state(LinkState::kL1);
  }
}

void Port::start_replay() {
  if (acked_ == next_tx_) return;
  c_.replays++;
  next_tx_ = acked_;
  progress_ns_ = now_;
  if (++replay_num_ > cfg_.max_replays && up()) {
    replay_num_ = 0;
    if (last_l0_from_recovery_ && now_ - l0_since_ < cfg_.retrain_fail_window_ns) retrain_failed();
    enter_recovery(RecoveryCause::kReplayRollover);
  }
}

bool Port::send_control(uint8_t type) {
  const uint32_t credit = credit_limit();
  FrameHeader h{type, 0, 0, 0, expected_ - 1, credit, 0, 0};
  h.crc = frame_crc(h, nullptr, 0);
  if (!put_frame(reinterpret_cast<const uint8_t*>(&h), sizeof(h))) return false;
  credit_sent_ = credit;
  ack_sent_ns_ = now_;
  return true;
}

void Port::transmit_data() {
  if (cfg_.model_bandwidth) {
    const uint64_t cap = 2ull * frame_bytes();
    const uint64_t add = (now_ - tokens_ns_) * rate_ / 1000;
    tokens_ns_ = now_;
    tokens_ = (tokens_ + int64_t(add > cap ? cap : add));
    if (tokens_ > int64_t(cap)) tokens_ = int64_t(cap);
  }
  for (uint32_t n = 0; n < cfg_.frames_per_poll && next_tx_ != next_seq_; ++n) {
    if (serial_diff(next_tx_, peer_credit_) >= 0) break;  // receiver has no room
    if (cfg_.model_bandwidth && tokens_ <= 0) break;
    const uint8_t* f = replay_slot(next_tx_);
    FrameHeader h;
    memcpy(&h, f, sizeof(h));
    const uint32_t len = uint32_t(sizeof(h)) + h.length;
    if (!put_frame(f, len)) break;
    if (serial_diff(next_tx_, high_tx_) >= 0) {
      high_tx_ = next_tx_ + 1;
      c_.tx_frames++;
      c_.tx_bytes += h.length;
    } else {
      c_.replayed_frames++;
    }
    if (acked_ == next_tx_) progress_ns_ = now_;  // the replay timer runs from the oldest send
    ++next_tx_;
    last_activity_ = now_;
  }
}

bool Port::put_frame(const uint8_t* frame, uint32_t length) {
  TransportStatus st;
  uint8_t* dst = t_->tx_reserve(length, &st);
  if (dst == nullptr) {
    if (st == TransportStatus::kIndexJump) c_.transport_errors++;
    return false;
  }
  memcpy(dst, frame, length);
  if (ber_ > 0) corrupt(dst, length);
  t_->tx_commit(length);
  if (cfg_.model_bandwidth) tokens_ -= length;
  return true;
}

uint64_t Port::next_error_gap() {
  if (ber_ >= 1) return 0;
  // Good bits before the next error, geometric with p = ber_.
  const double u = double((xorshift(&rng_) >> 11) + 1) * (1.0 / 9007199254740992.0);
  const double g = ln(u) / ln(1 - ber_);
  return g >= 1.8e19 ? ~0ull : uint64_t(g);
}

void Port::corrupt(uint8_t* frame, uint32_t length) {
  const uint64_t bits = uint64_t(length) * 8;
  uint64_t pos = 0;
  while (bits_to_error_ < bits - pos) {
    pos += bits_to_error_;
    frame[pos / 8] ^= uint8_t(1u << (pos % 8));
    c_.injected_bit_errors++;
    ++pos;
    bits_to_error_ = next_error_gap();
  }
  bits_to_error_ -= bits - pos;
}

// ---------------------------------------------------------------------------
// Loopback

void Port::poll_loopback() {
  if (!peer_live()) {
    go_down(absent_reason(), false);
    return;
  }
  receive_frames();
  if (state_ != LinkState::kLoopback) return;
  if (loopback_master_ && !loopback_echo_seen_ && now_ >= next_ts_) {
    if (send_ts(kFrameTs1, state_)) next_ts_ = now_ + cfg_.ts_interval_ns;
  }
}

// ---------------------------------------------------------------------------
// Receive

void Port::receive_frames() {
  for (uint32_t n = 0; n < cfg_.frames_per_poll; ++n) {
    // Read straight into the next receive-queue slot when one is free (a
    // good in-order data frame then stays there); else into scratch.
    const bool room = rx_pending() < cfg_.rx_frames;
    uint8_t* buf = room ? rx_slot(rx_tail_) : scratch_;
    uint32_t len = 0;
    const TransportStatus st = t_->rx(buf, frame_bytes(), &len);
    if (st == TransportStatus::kEmpty) return;
    if (st != TransportStatus::kOk) {
      c_.transport_errors++;
      error_event();
      continue;
    }
    handle_frame(buf, len);
    if (state_ == LinkState::kDetect || state_ == LinkState::kDisabled) return;
    // The peer's TS2 completes training: what follows it (data of the new
    // session) is read after enter_l0(), not dropped as pre-L0 traffic.
    if (got_ts2_ && (state_ == LinkState::kConfiguration || state_ == LinkState::kRecovery)) return;
  }
}

void Port::handle_frame(const uint8_t* frame, uint32_t length) {
  FrameHeader h;
  if (length < sizeof(h)) {
    c_.protocol_errors++;
    return;
  }
  memcpy(&h, frame, sizeof(h));
  const uint8_t* payload = frame + sizeof(h);
  const bool dll = up() || state_ == LinkState::kRecovery;
  if (h.length != length - sizeof(h) || h.crc != frame_crc(h, payload, h.length)) {
    if (state_ == LinkState::kLoopback && !loopback_master_) {
      put_frame(frame, length);  // a slave echoes what it got, errors included
      return;
    }
    c_.crc_errors++;
    if (dll && !nak_pending_) {
      nak_pending_ = true;
      send_nak_ = true;
    }
    error_event();
    return;
  }
  switch (h.type) {
    case kFrameTs1:
    case kFrameTs2: {
      TrainingSet ts;
      if (h.length != sizeof(ts)) break;
      memcpy(&ts, payload, sizeof(ts));
      if (ts.state >= kLinkStateCount || ts.speed_cap == 0 || ts.speed_cap > uint8_t(LinkSpeed::k64GT) ||
          ts.lanes == 0 || ts.lanes > kMaxLanes || ts.width_cap == 0 || ts.rx_credits == 0) {
        break;
      }
      ts.good_lanes &= lane_mask(ts.lanes);
      c_.ts_received++;
      handle_ts(h, ts);
      return;
    }
    case kFrameData:
      if (dll) handle_data(h, const_cast<uint8_t*>(frame));
      return;
    case kFrameAck:
    case kFrameNak:
      if (h.length != 0) break;
      if (dll) handle_ack(h, h.type == kFrameNak);
      return;
    case kFrameLoopback:
      if (state_ != LinkState::kLoopback) return;
      if (!loopback_master_) {
        put_frame(frame, length);
        return;
      }
      loopback_echo_seen_ = true;
      if (rx_pending() < cfg_.rx_frames) {
        if (frame != rx_slot(rx_tail_)) memcpy(rx_slot(rx_tail_), frame, length);
        ++rx_tail_;
        c_.rx_frames++;
        c_.rx_bytes += h.length;
      }
      return;
    default:
      break;
  }
  c_.protocol_errors++;
}

void Port::handle_ts(const FrameHeader& h, const TrainingSet& ts) {
  const bool fresh = is_fresh(ts.state);
  const bool from_recovery = ts.state == uint8_t(LinkState::kRecovery);
  const bool loop = (ts.flags & kTsFlagLoopback) != 0;
  switch (state_) {
    case LinkState::kPolling:
    case LinkState::kConfiguration:
      if (!fresh) return;  // the peer is still retraining an old session; our TS1 will end it
      peer_ts_ = ts;
      if (state_ == LinkState::kPolling) {
        if (++ts_rx_ >= 2) enter_configuration();
        if (state_ == LinkState::kPolling) return;
      }
      if (!renegotiate_keeping_ts2()) return;
      if (h.type == kFrameTs2 && ts.neg_speed == uint8_t(neg_speed_) &&
          ts.neg_width == uint8_t(neg_width_)) {
        got_ts2_ = true;
      }
      return;
    case LinkState::kRecovery:
      if (ts.state == uint8_t(LinkState::kPolling)) {
        go_down(LinkReason::kPeerReset, false);
        return;
      }
      if (!from_recovery) return;
      peer_ts_ = ts;
      rec_cfg_ = true;
      if (!renegotiate_keeping_ts2()) return;
      if (h.type == kFrameTs2 && ts.neg_speed == uint8_t(neg_speed_) &&
          ts.neg_width == uint8_t(neg_width_)) {
        got_ts2_ = true;
      }
      return;
    case LinkState::kL0:
    case LinkState::kL0s:
    case LinkState::kL1:
      if (ts.state == uint8_t(LinkState::kPolling)) {
        go_down(LinkReason::kPeerReset, false);
        return;
      }
      if (h.type == kFrameTs1 && loop && ts.state == uint8_t(LinkState::kLoopback)) {
        loopback_master_ = false;
        set_state(LinkState::kLoopback);
        return;
      }
      if (h.type == kFrameTs1 && from_recovery) {
        const bool from_l1 = state_ == LinkState::kL1;
        enter_recovery(from_l1 ? RecoveryCause::kL1Exit : RecoveryCause::kPeerRequest);
        handle_ts(h, ts);  // the peer is already training: this TS1 counts in Recovery
        return;
      }
      // A TS2 after we finished: the peer may still wait for ours (its copy
      // can have been lost). Its header says whether it is still training.
      if (h.type == kFrameTs2 && (ts.state == uint8_t(LinkState::kConfiguration) || from_recovery) &&
          (peer_.state == uint32_t(LinkState::kConfiguration) ||
           peer_.state == uint32_t(LinkState::kRecovery)) &&
          now_ >= next_ts_) {
        if (send_ts(kFrameTs2, LinkState(last_ts2_state_))) next_ts_ = now_ + cfg_.ts_interval_ns;
      }
      return;
    case LinkState::kLoopback:
      if (ts.state == uint8_t(LinkState::kPolling)) {
        go_down(LinkReason::kPeerReset, false);
      } else if (!loopback_master_ && h.type == kFrameTs1 && from_recovery) {
        enter_recovery(RecoveryCause::kPeerRequest);
        handle_ts(h, ts);
      }
      return;
    case LinkState::kDetect:
    case LinkState::kDisabled:
      return;
  }
}

void Port::handle_data(const FrameHeader& h, uint8_t* frame) {
  const int32_t d = serial_diff(h.seq, expected_);
  if (d < 0) {
    c_.duplicates++;
    ack_pending_ = true;  // the sender missed our ACK
    return;
  }
  if (d > 0) {
    if (!nak_pending_) {
      c_.seq_errors++;
      nak_pending_ = true;
      send_nak_ = true;
      error_event();
    }
    return;
  }
  if (rx_pending() >= cfg_.rx_frames) return;  // beyond credit: not acknowledged, comes again
  if (frame != rx_slot(rx_tail_)) memcpy(rx_slot(rx_tail_), frame, sizeof(FrameHeader) + h.length);
  ++rx_tail_;
  ++expected_;
  nak_pending_ = false;
  ack_pending_ = true;
  c_.rx_frames++;
  c_.rx_bytes += h.length;
  last_activity_ = now_;
}

void Port::handle_ack(const FrameHeader& h, bool nak) {
  const uint32_t progress = h.seq + 1 - acked_;
  const uint32_t window = next_tx_ - acked_;
  if (progress <= window) {
    if (progress != 0) {
      acked_ += progress;
      replay_num_ = 0;
      progress_ns_ = now_;
    }
  } else if (int32_t(progress) > 0) {
    c_.protocol_errors++;  // acknowledges frames never sent
    return;
  }
  if (serial_diff(h.credit, peer_credit_) > 0) peer_credit_ = h.credit;
  if (nak) {
    c_.naks_received++;
    start_replay();
  }
}

}  // namespace vtrn::link
