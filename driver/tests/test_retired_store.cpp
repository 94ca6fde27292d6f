// The retired-page store (driver/vtrnd/retired_store.h): a round trip, the
// path it builds from a hostile board model, and rejection of every kind of
// damaged or edited file (nothing from a rejected file is used).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "../vtrnd/retired_store.h"
#include "vtrn/crc32.h"

namespace {

using drv::Code;
using drv::RetiredGeometry;
using drv::RetiredList;
using drv::Result;

constexpr uint64_t kPage = 64 * 1024;
const RetiredGeometry kGeo{kPage, 256ull << 20, 256};

std::string g_dir;

int setup(void**) {
  char tmpl[] = "/tmp/vtrn-retired-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return -1;
  g_dir = tmpl;
  return 0;
}

int teardown(void**) {
  std::string cmd = "rm -rf '" + g_dir + "'";
  return system(cmd.c_str()) == 0 ? 0 : -1;
}

void write_file(const std::string& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

// A file with a correct CRC over `body`.
std::string sealed(const std::string& body) {
  char c[32];
  snprintf(c, sizeof c, "crc32 0x%08x\n", unsigned(vtrn::crc32(body.data(), body.size())));
  return body + c;
}

void test_saved_list_loads_back_sorted_and_unique(void**) {
  const std::string path = g_dir + "/board/chip0.retired";
  const drv::Error saved = drv::save_retired(path, kGeo, {3 * kPage, kPage, 3 * kPage}, "test");
  if (!saved.ok()) fail_msg("%s", saved.detail().c_str());
  const Result<RetiredList> loaded = drv::load_retired(path, kGeo);
  if (!loaded.ok()) fail_msg("%s", loaded.error().detail().c_str());
  assert_true(loaded.value().present);
  const std::vector<uint64_t>& offs = loaded.value().offsets;
  assert_int_equal(offs.size(), 2);
  assert_int_equal(offs[0], kPage);
  assert_int_equal(offs[1], 3 * kPage);
  // No temporary file is left next to it.
  assert_int_equal(access((path + ".tmp." + std::to_string(getpid())).c_str(), F_OK), -1);
}

void test_missing_file_is_absent_not_an_error(void**) {
  const Result<RetiredList> r = drv::load_retired(g_dir + "/nope/chip9.retired", kGeo);
  if (!r.ok()) fail_msg("%s", r.error().detail().c_str());
  assert_false(r.value().present);
  assert_true(r.value().offsets.empty());
}

void test_board_model_cannot_escape_the_state_directory(void**) {
  const std::string p = drv::retired_store_path("/state", "../../etc/x y", 3);
  assert_string_equal(p.c_str(), "/state/.._.._etc_x_y/chip3.retired");
  assert_string_equal(drv::retired_store_path("/state", "..", 0).c_str(), "/state/board/chip0.retired");
}

void expect_rejected(const std::string& text, const char* why_part) {
  const std::string path = g_dir + "/bad.retired";
  write_file(path, text);
  const Result<RetiredList> r = drv::load_retired(path, kGeo);
  if (r.ok()) fail_msg("accepted, wanted a refusal naming '%s'", why_part);
  // A file that was read but holds no valid list, not a failed system call.
  assert_int_equal(r.error().code(), Code::kDecode);
  const std::string& problem = r.error().detail();
  if (strstr(problem.c_str(), why_part) == nullptr) fail_msg("problem '%s' lacks '%s'", problem.c_str(), why_part);
}

void test_damaged_or_edited_files_are_rejected_whole(void**) {
  const std::string head = "# c\nvtrn-retired-pages 1\npage-bytes 65536\nhbm-bytes 268435456\n";
  // Valid except for the CRC: an edited page line.
  std::string good = sealed(head + "page 0x10000\n");
  std::string edited = good;
  edited.replace(edited.find("0x10000"), 7, "0x20000");
  expect_rejected(edited, "CRC mismatch");
  expect_rejected(head + "page 0x10000\n", "no crc32 line");
  expect_rejected(good.substr(0, good.size() - 1), "no line end");
  expect_rejected(sealed(head + "page 0x10001\n"), "not page-aligned");
  expect_rejected(sealed(head + "page 0x10000000\n"), "outside HBM");
  expect_rejected(sealed(head + "page 0x20000\npage 0x10000\n"), "ascending");
  expect_rejected(sealed(head + "page 0x10000\npage 0x10000\n"), "ascending");
  expect_rejected(sealed(head + "page 10000\n"), "expected 'page 0x");
  expect_rejected(sealed(head + "page 0x-1\n"), "expected 'page 0x");
  expect_rejected(sealed("vtrn-retired-pages 2\n"), "vtrn-retired-pages 1");
  expect_rejected(sealed("# c\nvtrn-retired-pages 1\npage-bytes 4096\nhbm-bytes 268435456\n"), "page size");
  expect_rejected(sealed("# c\nvtrn-retired-pages 1\npage-bytes 65536\nhbm-bytes 1\n"), "HBM size");
  expect_rejected(good + "page 0x30000\n", "after the crc32");
  expect_rejected(sealed(head + "rm -rf /\n"), "unexpected");
  std::string many = head;
  for (int i = 0; i < 257; ++i) many += "page 0x" + [&] { char b[32]; snprintf(b, sizeof b, "%x", unsigned(i) * 65536u); return std::string(b); }() + "\n";
  expect_rejected(sealed(many), "more than 256");
  expect_rejected(std::string(drv::kRetiredStoreMaxBytes + 10, '#'), "larger than");
  // And the good one is accepted, so the rejections above are about content.
  write_file(g_dir + "/good.retired", good);
  const Result<RetiredList> r = drv::load_retired(g_dir + "/good.retired", kGeo);
  if (!r.ok()) fail_msg("%s", r.error().detail().c_str());
  assert_true(r.value().present);
  assert_int_equal(r.value().offsets.size(), 1);
}

void test_symlinks_and_directories_are_not_followed(void**) {
  const std::string target = g_dir + "/real.retired";
  assert_true(drv::save_retired(target, kGeo, {kPage}, "t").ok());
  const std::string link = g_dir + "/link.retired";
  assert_int_equal(symlink(target.c_str(), link.c_str()), 0);
  assert_false(drv::load_retired(link, kGeo).ok());
  mkdir((g_dir + "/dir.retired").c_str(), 0700);
  assert_false(drv::load_retired(g_dir + "/dir.retired", kGeo).ok());
}

void test_save_refuses_pages_outside_the_geometry(void**) {
  assert_int_equal(drv::save_retired(g_dir + "/x.retired", kGeo, {kPage + 1}, "t").code(), Code::kInvalidArgument);
  assert_int_equal(drv::save_retired(g_dir + "/x.retired", kGeo, {256ull << 20}, "t").code(),
                   Code::kInvalidArgument);
  assert_int_equal(access((g_dir + "/x.retired").c_str(), F_OK), -1);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_saved_list_loads_back_sorted_and_unique),
      cmocka_unit_test(test_missing_file_is_absent_not_an_error),
      cmocka_unit_test(test_board_model_cannot_escape_the_state_directory),
      cmocka_unit_test(test_damaged_or_edited_files_are_rejected_whole),
      cmocka_unit_test(test_symlinks_and_directories_are_not_followed),
      cmocka_unit_test(test_save_refuses_pages_outside_the_geometry),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
