// Unit tests of the vtrnd client wire format (driver/lib/wire.cpp) and of
// Client over a real Unix socket pair: round trips, oversize and truncated
// frames, EOF handling, timeouts and id matching. No vtrnd is involved.
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "vtrn/drv/client.h"
#include "vtrn/drv/wire.h"
#include "vtrn_api.pb-c.h"

// cmocka defines fail() and friends as macros: include it after C++ headers.
extern "C" {
#include <cmocka.h>
}

namespace {

int g_sv[2] = {-1, -1};

int setup(void**) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g_sv) != 0) return -1;
  return 0;
}

int teardown(void**) {
  for (int& fd : g_sv) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  return 0;
}

void write_bytes(int fd, const void* p, size_t n) {
  assert_int_equal(write(fd, p, n), (ssize_t)n);
}

void assert_code(const drv::Error& e, drv::Code want) {
  assert_int_equal(int(e.code()), int(want));
  assert_true(e.ok() || !e.detail().empty());
}

void test_frame_round_trip_preserves_message(void**) {
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__PingRequest ping = VTRN__API__PING_REQUEST__INIT;
  req.id = 77;
  req.body_case = VTRN__API__REQUEST__BODY_PING;
  req.ping = &ping;
  ping.chip = 3;
  ping.count = 9;
  assert_code(drv::send_frame(g_sv[0], &req.base), drv::Code::kOk);
  std::vector<uint8_t> payload;
  assert_code(drv::recv_frame(g_sv[1], &payload, 1000), drv::Code::kOk);
  Vtrn__Api__Request* got = vtrn__api__request__unpack(nullptr, payload.size(), payload.data());
  assert_non_null(got);
  assert_int_equal(got->id, 77);
  assert_int_equal(got->body_case, VTRN__API__REQUEST__BODY_PING);
  assert_int_equal(got->ping->chip, 3);
  assert_int_equal(got->ping->count, 9);
  vtrn__api__request__free_unpacked(got, nullptr);
}

void test_encode_frame_writes_little_endian_length(void**) {
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  req.id = 0x1234;
  std::vector<uint8_t> out = {0xAA};
  assert_code(drv::encode_frame(&req.base, &out), drv::Code::kOk);
  size_t len = protobuf_c_message_get_packed_size(&req.base);
  assert_int_equal(out.size(), 1 + 4 + len);
  assert_int_equal(out[0], 0xAA);
  assert_int_equal(out[1], len & 0xff);
  assert_int_equal(out[2], 0);
  assert_int_equal(out[3], 0);
  assert_int_equal(out[4], 0);
}

void test_encode_frame_rejects_message_above_limit(void**) {
  Vtrn__Api__Response resp = VTRN__API__RESPONSE__INIT;
  std::string big(drv::kMaxFrame + 1, 'x');
  resp.error = big.data();
  std::vector<uint8_t> out;
  assert_code(drv::encode_frame(&resp.base, &out), drv::Code::kInvalidArgument);
  assert_code(drv::send_frame(g_sv[0], &resp.base), drv::Code::kInvalidArgument);
  assert_true(out.empty());
}

void test_recv_frame_rejects_oversize_length(void**) {
  uint32_t len = drv::kMaxFrame + 1;  // little-endian host assumed by the test
  uint8_t hdr[4] = {uint8_t(len), uint8_t(len >> 8), uint8_t(len >> 16), uint8_t(len >> 24)};
  write_bytes(g_sv[0], hdr, 4);
  std::vector<uint8_t> payload;
  assert_code(drv::recv_frame(g_sv[1], &payload, 1000), drv::Code::kDecode);
}

void test_recv_frame_accepts_frame_of_exactly_max_size(void**) {
  std::vector<uint8_t> frame(4 + drv::kMaxFrame, 0x5a);
  uint32_t len = drv::kMaxFrame;
  frame[0] = uint8_t(len);
  frame[1] = uint8_t(len >> 8);
  frame[2] = uint8_t(len >> 16);
  frame[3] = uint8_t(len >> 24);
  drv::FrameDecoder dec;
  dec.feed(frame.data(), frame.size());
  std::vector<uint8_t> payload;
  drv::Result<bool> got = dec.next(&payload);
  assert_true(got.ok());
  assert_true(got.value());
  assert_int_equal(payload.size(), drv::kMaxFrame);
}

void test_recv_frame_reports_truncated_frame_as_protocol_error(void**) {
  uint8_t bytes[] = {10, 0, 0, 0, 1, 2, 3};  // announces 10 bytes, sends 3, then EOF
  write_bytes(g_sv[0], bytes, sizeof bytes);
  close(g_sv[0]);
  g_sv[0] = -1;
  std::vector<uint8_t> payload;
  assert_code(drv::recv_frame(g_sv[1], &payload, 1000), drv::Code::kDecode);
}

void test_recv_frame_reports_truncated_header_as_protocol_error(void**) {
  uint8_t bytes[] = {10, 0};
  write_bytes(g_sv[0], bytes, sizeof bytes);
  close(g_sv[0]);
  g_sv[0] = -1;
  std::vector<uint8_t> payload;
  assert_code(drv::recv_frame(g_sv[1], &payload, 1000), drv::Code::kDecode);
}

void test_recv_frame_reports_orderly_eof_as_closed(void**) {
  close(g_sv[0]);
  g_sv[0] = -1;
  std::vector<uint8_t> payload;
  assert_code(drv::recv_frame(g_sv[1], &payload, 1000), drv::Code::kClosed);
}

void test_recv_frame_times_out_when_nothing_arrives(void**) {
  std::vector<uint8_t> payload;
  assert_code(drv::recv_frame(g_sv[1], &payload, 20), drv::Code::kTimeout);
}

void test_send_frame_to_a_closed_peer_is_closed(void**) {
  close(g_sv[1]);
  g_sv[1] = -1;
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  const drv::Error e = drv::send_frame(g_sv[0], &req.base);
  assert_code(e, drv::Code::kClosed);
  assert_string_equal(e.detail().c_str(), (std::string("send: ") + strerror(EPIPE)).c_str());
}

void test_recv_frame_on_a_closed_fd_names_the_call(void**) {
  // poll reports POLLNVAL for a closed fd, so the read itself fails.
  const int fd = g_sv[1];
  close(fd);
  g_sv[1] = -1;
  std::vector<uint8_t> payload;
  const drv::Error e = drv::recv_frame(fd, &payload, 1000);
  assert_code(e, drv::Code::kSystem);
  assert_string_equal(e.detail().c_str(), (std::string("read: ") + strerror(EBADF)).c_str());
}

void test_decoder_reassembles_frames_fed_byte_by_byte(void**) {
  std::vector<uint8_t> stream;
  for (uint64_t id = 1; id <= 3; ++id) {
    Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
    req.id = id;
    assert_code(drv::encode_frame(&req.base, &stream), drv::Code::kOk);
  }
  drv::FrameDecoder dec;
  std::vector<uint64_t> ids;
  std::vector<uint8_t> payload;
  for (uint8_t b : stream) {
    dec.feed(&b, 1);
    for (;;) {
      drv::Result<bool> r = dec.next(&payload);
      assert_true(r.ok());
      if (!r.value()) break;
      Vtrn__Api__Request* got = vtrn__api__request__unpack(nullptr, payload.size(), payload.data());
      assert_non_null(got);
      ids.push_back(got->id);
      vtrn__api__request__free_unpacked(got, nullptr);
    }
  }
  assert_int_equal(ids.size(), 3);
  assert_int_equal(ids[0], 1);
  assert_int_equal(ids[2], 3);
  assert_int_equal(dec.buffered(), 0);
}

void test_decoder_latches_broken_on_oversize_length(void**) {
  uint8_t hdr[4] = {0xff, 0xff, 0xff, 0xff};
  drv::FrameDecoder dec;
  dec.feed(hdr, 4);
  std::vector<uint8_t> payload;
  assert_code(dec.next(&payload).error(), drv::Code::kDecode);
  uint8_t ok[4] = {0, 0, 0, 0};
  dec.feed(ok, 4);
  assert_code(dec.next(&payload).error(), drv::Code::kDecode);
}

void test_runtime_dir_prefers_env_then_xdg(void**) {
  setenv("VTRN_RUNTIME_DIR", "/x/y", 1);
  assert_string_equal(drv::runtime_dir().c_str(), "/x/y");
  assert_string_equal(drv::socket_path().c_str(), "/x/y/vtrnd.sock");
  unsetenv("VTRN_RUNTIME_DIR");
  setenv("XDG_RUNTIME_DIR", "/run/user/5", 1);
  std::string want = "/run/user/5/vtrn-" + std::to_string(getuid());
  assert_string_equal(drv::runtime_dir().c_str(), want.c_str());
  unsetenv("XDG_RUNTIME_DIR");
  want = "/tmp/vtrn-" + std::to_string(getuid());
  assert_string_equal(drv::runtime_dir().c_str(), want.c_str());
}

void test_client_connect_names_missing_daemon(void**) {
  drv::Client c;
  const drv::Error err = c.connect("/nonexistent/dir/vtrnd.sock");
  assert_false(err.ok());
  assert_int_equal(int(err.code()), int(drv::Code::kNotRunning));
  assert_string_equal(err.detail().c_str(), "vtrnd is not running (no socket at /nonexistent/dir/vtrnd.sock)");
  assert_int_equal(c.fd(), -1);
}

void test_client_call_skips_responses_with_other_ids(void**) {
  // A Client only connects by path, so serve it from a listening socket in
  // a temporary directory.
  char dir[] = "/tmp/drv_test_wireXXXXXX";
  assert_non_null(mkdtemp(dir));
  std::string path = std::string(dir) + "/s.sock";
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strcpy(addr.sun_path, path.c_str());
  assert_int_equal(bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  assert_int_equal(listen(lfd, 1), 0);
  drv::Client c;
  assert_true(c.connect(path).ok());
  int sfd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  assert_true(sfd >= 0);

  // Prepare the answer before the call: the socket buffers it.
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__ListRequest list = VTRN__API__LIST_REQUEST__INIT;
  req.body_case = VTRN__API__REQUEST__BODY_LIST;
  req.list = &list;
  assert_true(c.send(&req).ok());
  uint64_t first = c.last_id();
  std::vector<uint8_t> payload;
  assert_code(drv::recv_frame(sfd, &payload, 1000), drv::Code::kOk);  // drain the send() above
  // call() will use id first+1; queue a stale frame and the real answer.
  Vtrn__Api__Response stale = VTRN__API__RESPONSE__INIT;
  stale.id = first;
  assert_code(drv::send_frame(sfd, &stale.base), drv::Code::kOk);
  Vtrn__Api__Response resp = VTRN__API__RESPONSE__INIT;
  resp.id = first + 1;
  resp.status = VTRN__API__STATUS__STATUS_UNKNOWN_CHIP;
  resp.error = const_cast<char*>("no chip 9");
  assert_code(drv::send_frame(sfd, &resp.base), drv::Code::kOk);

  drv::Result<drv::ResponsePtr> call = c.call(&req, 1000);
  assert_true(call.ok());
  drv::ResponsePtr out = std::move(call.value());
  assert_int_equal(out->id, first + 1);
  assert_int_equal(out->status, VTRN__API__STATUS__STATUS_UNKNOWN_CHIP);
  assert_string_equal(out->error, "no chip 9");

  close(sfd);
  drv::Result<drv::ResponsePtr> eof = c.recv(1000);
  assert_false(eof.ok());
  assert_int_equal(int(eof.error().code()), int(drv::Code::kClosed));
  assert_string_equal(eof.error().detail().c_str(), "vtrnd closed the connection");
  close(lfd);
  unlink(path.c_str());
  rmdir(dir);
}

void test_client_call_times_out_without_answer(void**) {
  char dir[] = "/tmp/drv_test_wireXXXXXX";
  assert_non_null(mkdtemp(dir));
  std::string path = std::string(dir) + "/s.sock";
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strcpy(addr.sun_path, path.c_str());
  assert_int_equal(bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  assert_int_equal(listen(lfd, 1), 0);
  drv::Client c;
  assert_true(c.connect(path).ok());
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  drv::Result<drv::ResponsePtr> out = c.call(&req, 30);
  assert_false(out.ok());
  assert_int_equal(int(out.error().code()), int(drv::Code::kTimeout));
  assert_string_equal(out.error().detail().c_str(), "timed out waiting for vtrnd (30 ms)");
  close(lfd);
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_frame_round_trip_preserves_message, setup, teardown),
      cmocka_unit_test_setup_teardown(test_encode_frame_writes_little_endian_length, setup, teardown),
      cmocka_unit_test_setup_teardown(test_encode_frame_rejects_message_above_limit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_recv_frame_rejects_oversize_length, setup, teardown),
      cmocka_unit_test_setup_teardown(test_recv_frame_accepts_frame_of_exactly_max_size, setup, teardown),
      cmocka_unit_test_setup_teardown(test_recv_frame_reports_truncated_frame_as_protocol_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_recv_frame_reports_truncated_header_as_protocol_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_recv_frame_reports_orderly_eof_as_closed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_recv_frame_times_out_when_nothing_arrives, setup, teardown),
      cmocka_unit_test_setup_teardown(test_send_frame_to_a_closed_peer_is_closed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_recv_frame_on_a_closed_fd_names_the_call, setup, teardown),
      cmocka_unit_test_setup_teardown(test_decoder_reassembles_frames_fed_byte_by_byte, setup, teardown),
      cmocka_unit_test_setup_teardown(test_decoder_latches_broken_on_oversize_length, setup, teardown),
      cmocka_unit_test_setup_teardown(test_runtime_dir_prefers_env_then_xdg, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_connect_names_missing_daemon, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_call_skips_responses_with_other_ids, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_call_times_out_without_answer, setup, teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
