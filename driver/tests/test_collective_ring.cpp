// drv::build_ring: the ring order of a collective from the board topology,
// on hand-built boards (no DTB): a ring, a 2x2 torus whose id order is not a
// ring, two chips with two links, and a switched board that has no ring.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <string>
#include <vector>

#include "../vtrnd/collective_service.h"

extern "C" {
#include <cmocka.h>
}

namespace {

using vtrn::board::Chip;
using vtrn::board::EndKind;

// Wires port `pa` of chip `a` to port `pb` of chip `b` (both directions).
void wire(std::vector<Chip>& chips, uint32_t a, uint32_t pa, uint32_t b, uint32_t pb) {
  auto end = [&](uint32_t c, uint32_t p, uint32_t peer, uint32_t peer_port) {
    Chip& ch = chips[c];
    if (ch.port_count <= p) ch.port_count = p + 1;
    ch.ports[p].index = p;
    ch.ports[p].connected = true;
    ch.ports[p].peer_on_board = true;
    ch.ports[p].peer.kind = EndKind::kChip;
    ch.ports[p].peer.id = peer;
    ch.ports[p].peer.port = peer_port;
  };
  end(a, pa, b, pb);
  end(b, pb, a, pa);
}

std::vector<Chip> board(uint32_t n) {
  std::vector<Chip> chips(n);
  for (uint32_t i = 0; i < n; ++i) chips[i].id = i;
  return chips;
}

// Every rank's send port reaches the next rank's chip and its receive port
// is the far end of the previous rank's send port.
void assert_ring_consistent(const std::vector<Chip>& chips, const std::vector<drv::RingMember>& ring) {
  const size_t n = ring.size();
  assert_int_equal(n, chips.size());
  for (size_t k = 0; k < n; ++k) {
    const Chip& c = chips[ring[k].chip];
    const auto& sp = c.ports[ring[k].send_port];
    assert_true(sp.connected);
    assert_int_equal(sp.peer.id, ring[(k + 1) % n].chip);
    assert_int_equal(ring[(k + 1) % n].recv_port, sp.peer.port);
  }
}

void test_ring_board_keeps_chip_id_order(void**) {
  std::vector<Chip> chips = board(4);
  for (uint32_t i = 0; i < 4; ++i) wire(chips, i, 0, (i + 1) % 4, 1);
  drv::Result<std::vector<drv::RingMember>> built = drv::build_ring(chips);
  assert_true(built.ok());
  const std::vector<drv::RingMember>& ring = *built;
  assert_int_equal(ring.size(), 4);
  for (uint32_t k = 0; k < 4; ++k) assert_int_equal(ring[k].chip, k);
  assert_ring_consistent(chips, ring);
}

void test_grid_without_id_order_ring_gets_a_snake(void**) {
  // 0-1 / 2-3 as a 2x2 grid: 1 and 2 are not neighbours, so 0,1,2,3 is no ring.
  std::vector<Chip> chips = board(4);
  wire(chips, 0, 0, 1, 0);
  wire(chips, 2, 0, 3, 0);
  wire(chips, 0, 1, 2, 1);
  wire(chips, 1, 1, 3, 1);
  drv::Result<std::vector<drv::RingMember>> built = drv::build_ring(chips);
  assert_true(built.ok());
  const std::vector<drv::RingMember>& ring = *built;
  assert_int_equal(ring.size(), 4);
  assert_ring_consistent(chips, ring);
}

void test_two_chips_with_two_links_use_both_directions(void**) {
  std::vector<Chip> chips = board(2);
  wire(chips, 0, 0, 1, 1);
  wire(chips, 1, 0, 0, 1);
  drv::Result<std::vector<drv::RingMember>> built = drv::build_ring(chips);
  assert_true(built.ok());
  const std::vector<drv::RingMember>& ring = *built;
  assert_int_equal(ring.size(), 2);
  assert_ring_consistent(chips, ring);
}

void test_switched_board_has_no_ring(void**) {
  std::vector<Chip> chips = board(4);
  for (uint32_t i = 0; i < 4; ++i) {
    chips[i].port_count = 1;
    chips[i].ports[0].connected = true;
    chips[i].ports[0].peer.kind = EndKind::kSwitch;
    chips[i].ports[0].peer.id = 0;
    chips[i].ports[0].peer.port = i;
  }
  const drv::Result<std::vector<drv::RingMember>> built = drv::build_ring(chips);
  assert_false(built.ok());
  assert_non_null(strstr(built.error().detail().c_str(), "cannot form a ring"));
}

void test_one_chip_is_not_a_ring(void**) {
  const drv::Result<std::vector<drv::RingMember>> built = drv::build_ring(board(1));
  assert_false(built.ok());
  assert_non_null(strstr(built.error().detail().c_str(), "at least 2 chips"));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_board_keeps_chip_id_order),
      cmocka_unit_test(test_grid_without_id_order_ring_gets_a_snake),
      cmocka_unit_test(test_two_chips_with_two_links_use_both_directions),
      cmocka_unit_test(test_switched_board_has_no_ring),
      cmocka_unit_test(test_one_chip_is_not_a_ring),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
