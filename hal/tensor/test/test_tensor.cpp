// hal/tensor tests: the tensor engine queue driver over the fake register
// backend, and end to end against vtrn-hw's tensor engine model on the same
// region bytes: commands as the ABI lays them out, the doorbell, capacity,
// completions with status and modeled time, a latched queue, and the remap
// window (ABI 1.3): published last, refused without kCapTensorRemap, the
// engine's answer (applied or kFieldRemap) read back.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include <cmocka.h>
}

#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "hal/copy_engine.h"
#include "hal/fake_mmio.h"
#include "hal/tensor.h"
#include "vtrn/hw/tensor_engine.h"
#include "vtrn/kernels_reference.h"

using hal::Status;
using namespace vtrn::engine;

namespace {

constexpr uint64_t kRamBase = 0x40000000ull;
constexpr uint64_t kRamSize = 8ull << 20;

struct Rec final : vtrn::hw::Signals {
  void chip_irq(uint16_t v) override { ++irqs[v]; }
  void host_irq() override {}
  uint32_t irqs[kVectorCount] = {};
};

struct Rig {
  std::vector<uint8_t> region = std::vector<uint8_t>(kRegionBytes + 4096);
  std::vector<uint8_t> ram = std::vector<uint8_t>(kRamSize);
  uint32_t doorbell = 0;
  vtrn::hw::ChipMemory mem;
  Rec sig;
  vtrn::hw::ErrorLog log{mem, sig};
  vtrn::hw::EngineProps props;
  hal::copy::EngineRegion reg;
  explicit Rig(uint64_t capabilities = 0) {
    hal::fake::reset();
    mem.region = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(region.data()) + 4095) & ~uintptr_t(4095));
    mem.ram = ram.data();
    mem.ram_base = kRamBase;
    mem.ram_size = kRamSize;
    props.tensor_engines = 2;
    for (auto& f : props.tensor_flops_per_s) f = 1000000000000ull;
    IdBlock id{};
    id.magic = kMagic;
    id.abi_major = kAbiMajor;
    id.region_bytes = kRegionBytes;
    id.vector_count = kVectorCount;
    id.tensor_engines = 2;
    id.mpu_windows = kMpuWindows;
    id.dma_fw_depth = kDmaFwDepth;
    id.tensor_depth = kTensorDepth;
    id.capabilities = capabilities;
    memcpy(mem.region, &id, sizeof id);
    assert_int_equal(reg.init(reinterpret_cast<uintptr_t>(mem.region), kRegionBytes,
                              reinterpret_cast<uintptr_t>(&doorbell)),
                     Status::kOk);
  }
};

hal::tensor::Gemm f32_gemm(uint32_t m, uint32_t n, uint32_t k, uint64_t cookie) {
  hal::tensor::Gemm g;
  g.dtype = uint32_t(vtrn::num::DType::kF32);
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = kRamBase;
  g.b = kRamBase + 0x100000;
  g.c = kRamBase + 0x200000;
  g.cookie = cookie;
  return g;
}

void test_submit_lays_out_the_command_and_publishes_it_last(void**) {
  Rig r;
  hal::tensor::TensorEngine t;
  assert_int_equal(t.init(r.reg, 2), Status::kOutOfRange);
  assert_int_equal(t.init(r.reg, 1), Status::kOk);
  hal::fake::clear_log();
  hal::tensor::Gemm g = f32_gemm(8, 16, 32, 42);
  g.ldc = 20;
  assert_int_equal(t.submit(g), Status::kOk);
  const TensorCommand& c = r.mem.tensor(1)->sq[0];
  assert_int_equal(c.opcode, kTensorOpGemm);
  assert_int_equal(c.flags, kTensorIrq);
  assert_int_equal(c.m, 8);
  assert_int_equal(c.n, 16);
  assert_int_equal(c.k, 32);
  assert_int_equal(c.ldc, 20);
  assert_int_equal(c.c, kRamBase + 0x200000);
  assert_int_equal(c.cookie, 42);
  const auto w = hal::fake::writes();
  assert_int_equal(w.size(), 1);
  assert_true(w[0].addr == hal::fake::addr_of(&r.mem.tensor(1)->sq_prod.value));
  assert_int_equal(w[0].value, 1);
  assert_int_equal(t.ring(), Status::kOk);
  assert_int_equal(r.doorbell, kVectorTensor0 + 1u);
  g.k = 0;
  assert_int_equal(t.submit(g), Status::kInvalidArgument);
}

void test_submit_refuses_past_the_queue_depth(void**) {
  Rig r;
  hal::tensor::TensorEngine t;
  assert_int_equal(t.init(r.reg, 0), Status::kOk);
  for (uint32_t i = 0; i < kTensorDepth; ++i) assert_int_equal(t.submit(f32_gemm(1, 1, 1, i)), Status::kOk);
  assert_int_equal(t.submit(f32_gemm(1, 1, 1, 99)), Status::kCapacity);
  assert_int_equal(t.in_flight(), kTensorDepth);
}

void test_gemm_round_trip_through_the_model(void**) {
  Rig r;
  vtrn::hw::blas_single_threaded();
  vtrn::hw::TensorEngine model(r.mem, 0, r.props, r.sig, r.log, vtrn::hw::monotonic_ns);
  hal::tensor::TensorEngine t;
  assert_int_equal(t.init(r.reg, 0), Status::kOk);
  t.arm_irq(true);
  float* a = reinterpret_cast<float*>(r.ram.data());
  float* b = reinterpret_cast<float*>(r.ram.data() + 0x100000);
  for (uint32_t i = 0; i < 16 * 24; ++i) a[i] = float(int(i % 7) - 3) * 0.5f;
  for (uint32_t i = 0; i < 12 * 24; ++i) b[i] = float(int(i % 5) - 2) * 0.25f;
  assert_int_equal(t.submit(f32_gemm(16, 12, 24, 7)), Status::kOk);
  TensorCompletion c;
  assert_int_equal(t.poll(&c), Status::kNotFound);
  assert_true(model.run_pass());
  assert_int_equal(t.poll(&c), Status::kOk);
  assert_int_equal(c.cookie, 7);
  assert_int_equal(c.status, kTensorOk);
  assert_int_equal(c.flops, 2u * 16 * 12 * 24);
  assert_int_equal(c.modeled_ns, 10);  // 9216 flops at 1 TFLOP/s, rounded up
  assert_int_equal(r.sig.irqs[kVectorTensor0], 1);
  vtrn::kern::GemmArgs args{vtrn::num::DType::kF32, 16, 12, 24, a, nullptr, b, nullptr,
                            reinterpret_cast<float*>(r.ram.data() + 0x200000)};
  vtrn::kern::GemmCheck chk;
  assert_true(vtrn::kern::gemm_verify(args, &chk));
  assert_int_equal(t.in_flight(), 0);
}

void test_poll_refuses_more_completions_than_commands(void**) {
  Rig r;
  hal::tensor::TensorEngine t;
  assert_int_equal(t.init(r.reg, 0), Status::kOk);
  r.mem.tensor(0)->cq_prod.value = 1;
  TensorCompletion c;
  assert_int_equal(t.poll(&c), Status::kBadHardware);
  r.mem.tensor(0)->error.value = 1;
  assert_int_equal(t.error(), 1);
}

constexpr uint64_t kRemapBase = 0x1000000000ull;
constexpr uint64_t kRemapSize = 64ull << 20;

void test_configure_publishes_the_remap_window_last_and_reads_the_answer(void**) {
  Rig r(kCapTensorGemm | kCapTensorRemap);
  hal::tensor::TensorEngine t;
  TensorConfig c{};
  c.remap_base = kRemapBase;
  c.remap_size = kRemapSize;
  assert_int_equal(t.configure(c), Status::kNotReady);
  assert_int_equal(t.init(r.reg, 1), Status::kOk);
  TensorEngineBlock* b = r.mem.tensor(1);
  // What the engine would see the moment the generation lands.
  uint64_t seen_base = 0, seen_size = 0;
  hal::fake::add_region(
      hal::fake::addr_of(&b->config.config_gen), 4, nullptr,
      [&](uintptr_t, unsigned, uint64_t) {
        seen_base = b->config.remap_base;
        seen_size = b->config.remap_size;
        return false;
      });
  hal::fake::clear_log();
  uint32_t st = 0;
  assert_false(t.config_done(&st));  // nothing asked yet
  assert_int_equal(t.configure(c), Status::kOk);
  assert_int_equal(seen_base, kRemapBase);
  assert_int_equal(seen_size, kRemapSize);
  const auto w = hal::fake::writes();
  assert_int_equal(w.size(), 2);
  assert_true(w[0].addr == hal::fake::addr_of(&b->config.config_gen));
  assert_int_equal(w[0].value, 1);
  assert_int_equal(r.doorbell, kVectorTensor0 + 1u);
  // Not done until the engine acknowledges this generation.
  assert_false(t.config_done(&st));
  b->config_status = kEngineBadConfig | (kFieldRemap << 8);
  b->config_ack = 1;
  assert_true(t.config_done(&st));
  assert_int_equal(st, kEngineBadConfig | (kFieldRemap << 8));
  // The next one is generation 2; the old ack does not answer it.
  c.remap_base = c.remap_size = 0;
  assert_int_equal(t.configure(c), Status::kOk);
  assert_int_equal(b->config.config_gen, 2);
  assert_false(t.config_done(&st));
  // Reserved words are refused before anything is written.
  hal::fake::clear_log();
  c.reserved[4] = 1;
  assert_int_equal(t.configure(c), Status::kInvalidArgument);
  assert_int_equal(hal::fake::writes().size(), 0);
  // A driver initialised over a block that was configured picks the generation up.
  hal::tensor::TensorEngine again;
  assert_int_equal(again.init(r.reg, 1), Status::kOk);
  b->config_ack = 2;
  assert_true(again.config_done(&st));
}

void test_configure_writes_nothing_to_engines_without_the_capability(void**) {
  Rig r(kCapTensorGemm);  // an ABI 1.2 vtrn-hw: the config words are its pad
  hal::tensor::TensorEngine t;
  assert_int_equal(t.init(r.reg, 0), Status::kOk);
  hal::fake::clear_log();
  TensorConfig c{};
  c.remap_base = kRemapBase;
  c.remap_size = kRemapSize;
  assert_int_equal(t.configure(c), Status::kNotFound);
  assert_int_equal(hal::fake::writes().size(), 0);
  assert_int_equal(r.mem.tensor(0)->config.remap_base, 0);
  assert_int_equal(r.mem.tensor(0)->config.config_gen, 0);
  assert_int_equal(r.doorbell, 0);
  uint32_t st = 0;
  assert_false(t.config_done(&st));
}

void test_configure_round_trip_through_the_model(void**) {
  Rig r(kCapTensorGemm | kCapTensorRemap);
  // A RAM memfd for the model's remap view to map (only the window is
  // configured here; no command reaches it).
  const int fd = memfd_create("hal-tensor-ram", MFD_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, off_t(kRamSize)), 0);
  r.mem.ram_fd = fd;
  vtrn::hw::TensorEngine model(r.mem, 0, r.props, r.sig, r.log, vtrn::hw::monotonic_ns);
  hal::tensor::TensorEngine t;
  assert_int_equal(t.init(r.reg, 0), Status::kOk);
  TensorConfig c{};
  c.remap_base = kRemapBase;
  c.remap_size = kRemapSize;
  assert_int_equal(t.configure(c), Status::kOk);
  uint32_t st = 1;
  assert_false(t.config_done(&st));
  assert_true(model.has_work());
  model.run_pass();
  assert_true(t.config_done(&st));
  assert_int_equal(st, kEngineOk);
  assert_true(model.has_remap());
  // A window over RAM: refused, naming the field; the engine has none then.
  c.remap_base = kRamBase;
  assert_int_equal(t.configure(c), Status::kOk);
  model.run_pass();
  assert_true(t.config_done(&st));
  assert_int_equal(st, kEngineBadConfig | (kFieldRemap << 8));
  assert_false(model.has_remap());
  close(fd);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_submit_lays_out_the_command_and_publishes_it_last),
      cmocka_unit_test(test_submit_refuses_past_the_queue_depth),
      cmocka_unit_test(test_gemm_round_trip_through_the_model),
      cmocka_unit_test(test_poll_refuses_more_completions_than_commands),
      cmocka_unit_test(test_configure_publishes_the_remap_window_last_and_reads_the_answer),
      cmocka_unit_test(test_configure_writes_nothing_to_engines_without_the_capability),
      cmocka_unit_test(test_configure_round_trip_through_the_model),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
