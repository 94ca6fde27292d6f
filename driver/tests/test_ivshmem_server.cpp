// Unit tests of the per-chip ivshmem server: a test client plays QEMU's part
// of the protocol (docs/specs/ivshmem-spec.rst) over a real Unix socket and
// checks the message sequence, the fds it receives, and that doorbells work
// both ways through them.
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "vtrn/drv/ivshmem_server.h"
#include "vtrn/hostif.h"

extern "C" {
#include <cmocka.h>
}

namespace {

constexpr uint64_t kBar2 = 4u << 20;
constexpr uint32_t kVectors = 4;

struct Fixture {
  char dir[64];
  std::string path;
  drv::IvshmemServer server;
};

struct Msg {
  int64_t value;
  int fd;  // -1 when none attached
};

int connect_to(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strcpy(addr.sun_path, path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool recv_msg(int sock, Msg* m) {
  uint8_t bytes[8];
  iovec iov{bytes, sizeof bytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  if (n != 8) return false;
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(bytes[i]) << (8 * i);
  m->value = int64_t(v);
  m->fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) memcpy(&m->fd, CMSG_DATA(c), sizeof(int));
  }
  return true;
}

int setup(void** state) {
  auto* f = new Fixture;
  strcpy(f->dir, "/tmp/drv_test_ivshmemXXXXXX");
  if (mkdtemp(f->dir) == nullptr) return -1;
  f->path = std::string(f->dir) + "/ivshmem.sock";
  if (const drv::Error err = f->server.create(f->path, kBar2, kVectors); !err.ok()) {
    fprintf(stderr, "create: %s\n", err.detail().c_str());
    return -1;
  }
  *state = f;
  return 0;
}

int teardown(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->server.close();
  rmdir(f->dir);
  delete f;
  return 0;
}

// Connects a client, lets the server accept it, reads the whole handshake.
std::vector<Msg> handshake(Fixture* f, int* client) {
  *client = connect_to(f->path);
  assert_true(*client >= 0);
  assert_true(f->server.accept_peer().ok());
  std::vector<Msg> msgs;
  for (uint32_t i = 0; i < 3 + 2 * kVectors; ++i) {
    Msg m;
    assert_true(recv_msg(*client, &m));
    msgs.push_back(m);
  }
  return msgs;
}

void close_fds(std::vector<Msg>& msgs) {
  for (Msg& m : msgs) {
    if (m.fd >= 0) close(m.fd);
  }
}

void test_socket_is_owner_only(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  struct stat st{};
  assert_int_equal(stat(f->path.c_str(), &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0600);
}

void test_handshake_follows_protocol_order(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  int client;
  std::vector<Msg> msgs = handshake(f, &client);
  assert_int_equal(msgs[0].value, 0);  // protocol version
  assert_int_equal(msgs[0].fd, -1);
  assert_int_equal(msgs[1].value, vtrn::hostif::kChipPeerId);
  assert_int_equal(msgs[1].fd, -1);
  assert_int_equal(msgs[2].value, -1);
  assert_true(msgs[2].fd >= 0);
  for (uint32_t v = 0; v < kVectors; ++v) {
    assert_int_equal(msgs[3 + v].value, vtrn::hostif::kHostPeerId);
    assert_true(msgs[3 + v].fd >= 0);
    assert_int_equal(msgs[3 + kVectors + v].value, vtrn::hostif::kChipPeerId);
    assert_true(msgs[3 + kVectors + v].fd >= 0);
  }
  // Nothing else follows the handshake.
  assert_int_equal(fcntl(client, F_SETFL, O_NONBLOCK), 0);
  char extra;
  assert_int_equal(recv(client, &extra, 1, 0), -1);
  assert_int_equal(errno, EAGAIN);
  close_fds(msgs);
  close(client);
}

void test_shared_memory_fd_is_sealed_bar2(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  int client;
  std::vector<Msg> msgs = handshake(f, &client);
  int shm = msgs[2].fd;
  struct stat st{};
  assert_int_equal(fstat(shm, &st), 0);
  assert_int_equal(st.st_size, kBar2);
  int seals = fcntl(shm, F_GET_SEALS);
  assert_true(seals & F_SEAL_SHRINK);
  assert_true(seals & F_SEAL_GROW);
  assert_int_not_equal(ftruncate(shm, kBar2 / 2), 0);
  // Same pages as the server's mapping.
  uint32_t word = 0x5a5aa5a5;
  assert_int_equal(pwrite(shm, &word, 4, 4096), 4);
  uint32_t seen;
  memcpy(&seen, f->server.bar2() + 4096, 4);
  assert_int_equal(seen, word);
  close_fds(msgs);
  close(client);
}

void test_doorbells_reach_the_other_side(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  int client;
  std::vector<Msg> msgs = handshake(f, &client);
  for (uint32_t v = 0; v < kVectors; ++v) {
    // Chip -> host: QEMU writes the host peer's eventfd for vector v.
    uint64_t one = 1;
    assert_int_equal(write(msgs[3 + v].fd, &one, 8), 8);
    assert_int_equal(write(msgs[3 + v].fd, &one, 8), 8);
    assert_int_equal(f->server.drain_host(v), 2);
    assert_int_equal(f->server.drain_host(v), 0);
    // Host -> chip: vtrnd writes the chip's own eventfd for vector v.
    assert_true(f->server.notify_chip(v).ok());
    uint64_t got = 0;
    assert_int_equal(read(msgs[3 + kVectors + v].fd, &got, 8), 8);
    assert_int_equal(got, 1);
  }
  assert_int_equal(int(f->server.notify_chip(kVectors).code()), int(drv::Code::kOutOfRange));
  close_fds(msgs);
  close(client);
}

void test_second_peer_is_refused(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  int client;
  std::vector<Msg> msgs = handshake(f, &client);
  int second = connect_to(f->path);
  assert_true(second >= 0);
  const drv::Error err = f->server.accept_peer();
  assert_int_equal(int(err.code()), int(drv::Code::kBusy));
  assert_non_null(strstr(err.detail().c_str(), "second ivshmem peer"));
  char b;
  assert_int_equal(read(second, &b, 1), 0);  // closed without a handshake
  close(second);
  close_fds(msgs);
  close(client);
}

void test_close_unlinks_socket(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->server.close();
  struct stat st{};
  assert_int_equal(stat(f->path.c_str(), &st), -1);
  assert_null(f->server.bar2());
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_socket_is_owner_only, setup, teardown),
      cmocka_unit_test_setup_teardown(test_handshake_follows_protocol_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shared_memory_fd_is_sealed_bar2, setup, teardown),
      cmocka_unit_test_setup_teardown(test_doorbells_reach_the_other_side, setup, teardown),
      cmocka_unit_test_setup_teardown(test_second_peer_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_close_unlinks_socket, setup, teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
