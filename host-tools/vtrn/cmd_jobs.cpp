// `vtrn submit FILE`, `vtrn run gemm|add|mul|gelu|softmax|sum`, `vtrn jobs
// [CHIP]`, `vtrn job show|wait|cancel ID`: jobs on a chip's NeuronCores
// through vtrnd (proto/vtrn_api_jobs.proto).
//
// The CLI keeps every host path: it reads a job's input files, sends their
// bytes, and writes the outputs vtrnd returns. `vtrn run` is the quick
// form: it generates seeded random data, quantizes it with the same
// numerics code the chip decodes with (common/numerics), runs the job, and
// verifies the chip's result against the host reference (GEMM: the error
// bound of kernels_reference.h; elementwise and reductions: the host build
// of the very kernels the firmware runs). A mismatch is a failure (exit 1).
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <random>

#include "cli_error.h"
#include "commands.h"
#include "daemon.h"
#include "job_file.h"
#include "render.h"
#include "vtrn/drv/fd.h"
#include "vtrn/kernels.h"
#include "vtrn/kernels_reference.h"
#include "vtrn/numerics.h"

namespace tools {
namespace {

using nlohmann::json;

// What one request may carry besides the data (names, steps, framing).
constexpr uint64_t kMaxInputBytes = (4u << 20) - (128u << 10);
constexpr int kWaitSlackMs = 15000;  // beyond the job's own timeout
constexpr uint32_t kDefaultTimeoutMs = 60000;

json job_json(const Vtrn__Api__JobInfo& j) {
  json kernels = json::array();
  for (size_t i = 0; i < j.n_kernels; ++i) kernels.push_back(j.kernels[i]);
  return {{"id", j.id},
          {"chip", j.chip},
          {"name", j.name ? j.name : ""},
          {"state", vtrn::proto::job_state_name(j.state)},
          {"reason", j.reason ? j.reason : ""},
          {"failed_step", j.failed_step},
          {"priority", j.priority},
          {"timeout_ms", j.timeout_ms},
          {"max_cores", j.max_cores},
          {"steps", j.steps},
          {"kernels", kernels},
          {"buffer_bytes", j.buffer_bytes},
          {"client", j.client},
          {"uid", j.uid >= 0 ? json(j.uid) : json(nullptr)},
          {"detached", bool(j.detached)},
          {"latency_ns", j.latency_ns},
          {"stage_in_ns", j.stage_in_ns},
          {"chip_queue_ns", j.chip_queue_ns},
          {"chip_run_ns", j.chip_run_ns},
          {"stage_out_ns", j.stage_out_ns},
          {"cores_used", j.cores_used},
          {"engine", vtrn::proto::engine_name(j.engine)},
          {"engines_used", j.engines_used},
          {"chip_modeled_ns", j.chip_modeled_ns},
          {"engine_wall_ns", j.engine_wall_ns},
          {"flops", j.flops},
          {"gflops", j.gflops}};
}

std::string fixed(double v, int prec) {
  char b[64];
  snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

std::string sci(double v) {
  char b[64];
  snprintf(b, sizeof b, "%.3g", v);
  return b;
}

std::string join(const json& arr) {
  std::string s;
  for (const auto& k : arr) s += (s.empty() ? "" : ",") + k.get<std::string>();
  return s;
}

// "tensor x4" (engines that ran a tile), "cores", or "-" before the chip said.
std::string engine_text(const json& j) {
  const std::string e = j["engine"];
  if (e == "tensor") return "tensor x" + std::to_string(j["engines_used"].get<uint32_t>());
  return e == "default" ? "-" : e;
}

void print_job_table(const json& jobs) {
  Table t({"ID", "CHIP", "NAME", "STATE", "KERNELS", "ENGINE", "CORES", "LATENCY", "CHIP RUN", "MODELED", "GFLOP/S",
           "REASON"});
  for (const auto& j : jobs) {
    const uint64_t lat = j["latency_ns"], run = j["chip_run_ns"], modeled = j["chip_modeled_ns"];
    t.add({std::to_string(j["id"].get<uint64_t>()), std::to_string(j["chip"].get<uint32_t>()),
           j["name"].get<std::string>().empty() ? "-" : j["name"].get<std::string>(), j["state"].get<std::string>(),
           join(j["kernels"]), engine_text(j),
           j["cores_used"].get<uint32_t>() ? std::to_string(j["cores_used"].get<uint32_t>()) : "-",
           lat ? format_ns(lat) : "-", run ? format_ns(run) : "-", modeled ? format_ns(modeled) : "-",
           run ? fixed(j["gflops"].get<double>(), 3) : "-", j["reason"].get<std::string>()});
  }
  std::cout << t.render();
}

void print_job_detail(const json& j) {
  Table t({"FIELD", "VALUE"});
  auto ns = [&](const char* k) { return j[k].get<uint64_t>() ? format_ns(j[k].get<uint64_t>()) : "-"; };
  t.add({"id", std::to_string(j["id"].get<uint64_t>())});
  t.add({"chip", std::to_string(j["chip"].get<uint32_t>())});
  t.add({"name", j["name"].get<std::string>().empty() ? "-" : j["name"].get<std::string>()});
  t.add({"state", j["state"].get<std::string>()});
  if (!j["reason"].get<std::string>().empty()) t.add({"reason", j["reason"].get<std::string>()});
  t.add({"kernels", join(j["kernels"])});
  t.add({"buffers", format_bytes(j["buffer_bytes"].get<uint64_t>())});
  t.add({"priority / timeout", std::to_string(j["priority"].get<uint32_t>()) + " / " +
                                   std::to_string(j["timeout_ms"].get<uint32_t>()) + " ms"});
  t.add({"engine", engine_text(j)});
  t.add({"cores used", std::to_string(j["cores_used"].get<uint32_t>())});
  t.add({"latency (submit -> end)", ns("latency_ns")});
  t.add({"staging in (alloc + DMA)", ns("stage_in_ns")});
  t.add({"queued on chip", ns("chip_queue_ns")});
  t.add({"running on chip", ns("chip_run_ns")});
  t.add({"modeled chip time", ns("chip_modeled_ns")});
  t.add({"tensor engines busy (host)", ns("engine_wall_ns")});
  t.add({"reading out (DMA)", ns("stage_out_ns")});
  t.add({"GFLOP/s (chip run)", j["chip_run_ns"].get<uint64_t>() ? fixed(j["gflops"].get<double>(), 3) : "-"});
  std::cout << t.render();
}

// The exit code of a job that ended: DONE is success, a timeout is kTimeout,
// every other end is a failure.
// `context` is what --json would have printed: it goes into the error
// document beside "error".
void throw_for_end(const Vtrn__Api__JobInfo& j, json context = json::object()) {
  if (j.state == VTRN__TYPES__JOB_STATE__JOB_STATE_DONE) return;
  const std::string what = "job " + std::to_string(j.id) + " " + vtrn::proto::job_state_name(j.state) +
                           (j.reason && j.reason[0] ? std::string(": ") + j.reason : "");
  throw CliError(j.state == VTRN__TYPES__JOB_STATE__JOB_STATE_TIMED_OUT ? Exit::kTimeout : Exit::kFailed, what)
      .with_context(std::move(context));
}

// Submit.

// A request under construction and the storage it points into.
struct SubmitMsg {
  std::vector<Vtrn__Api__JobBuffer> bufs;
  std::vector<Vtrn__Api__JobBuffer*> bufp;
  std::vector<Vtrn__Api__JobStep> steps;
  std::vector<Vtrn__Api__JobStep*> stepp;
  Vtrn__Api__JobSubmitRequest req = VTRN__API__JOB_SUBMIT_REQUEST__INIT;

  void build(JobSpec& spec, uint32_t chip, bool wait, bool detach) {
    bufs.assign(spec.buffers.size(), VTRN__API__JOB_BUFFER__INIT);
    bufp.resize(spec.buffers.size());
    for (size_t i = 0; i < spec.buffers.size(); ++i) {
      JobBufferSpec& b = spec.buffers[i];
      bufs[i].name = b.name.data();
      bufs[i].bytes = b.bytes;
      bufs[i].data.data = b.data.data();
      bufs[i].data.len = b.data.size();
      bufs[i].output = !b.output.empty();
      bufp[i] = &bufs[i];
    }
    steps.assign(spec.steps.size(), VTRN__API__JOB_STEP__INIT);
    stepp.resize(spec.steps.size());
    auto s_or_null = [](std::string& s) { return s.empty() ? nullptr : s.data(); };
    for (size_t i = 0; i < spec.steps.size(); ++i) {
      JobStepSpec& s = spec.steps[i];
      steps[i].kernel = s.kernel;
      steps[i].dtype = s.dtype;
      steps[i].m = s.m;
      steps[i].n = s.n;
      steps[i].k = s.k;
      steps[i].a = s_or_null(s.a);
      steps[i].a_scales = s_or_null(s.a_scales);
      steps[i].b = s_or_null(s.b);
      steps[i].b_scales = s_or_null(s.b_scales);
      steps[i].out = s_or_null(s.out);
      stepp[i] = &steps[i];
    }
    req.chip = chip;
    req.name = spec.name.data();
    req.priority = spec.priority;
    req.timeout_ms = spec.timeout_ms;
    req.max_cores = spec.max_cores;
    req.engine = spec.engine;
    req.n_buffers = bufp.size();
    req.buffers = bufp.data();
    req.n_steps = stepp.size();
    req.steps = stepp.data();
    req.wait = wait;
    req.detach = detach;
  }
};

struct Submitted {
  json job;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> outputs;
  drv::ResponsePtr resp;
};

Submitted submit_job(JobSpec& spec, uint32_t chip, bool wait, bool detach) {
  uint64_t in = 0;
  for (const auto& b : spec.buffers) in += b.data.size();
  if (in > kMaxInputBytes)
    throw CliError(Exit::kFailed, "inputs of " + format_bytes(in) + " exceed what one request carries (" +
                                      format_bytes(kMaxInputBytes) + ")");
  SubmitMsg m;
  m.build(spec, chip, wait, detach);
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  req.body_case = VTRN__API__REQUEST__BODY_JOB_SUBMIT;
  req.job_submit = &m.req;
  DaemonConnection conn = DaemonConnection::open();
  const int timeout = wait ? int(spec.timeout_ms ? spec.timeout_ms : kDefaultTimeoutMs) + kWaitSlackMs : kCallTimeoutMs;
  Submitted out;
  out.resp = conn.call(&req, VTRN__API__RESPONSE__BODY_JOB_SUBMIT, timeout);
  const Vtrn__Api__JobSubmitResponse* sr = out.resp->job_submit;
  if (sr->job == nullptr) throw CliError(Exit::kFailed, "vtrnd answered a submit without the job");
  out.job = job_json(*sr->job);
  for (size_t i = 0; i < sr->n_outputs; ++i) {
    const auto* o = sr->outputs[i];
    out.outputs.emplace_back(o->name ? o->name : "", std::vector<uint8_t>(o->data.data, o->data.data + o->data.len));
  }
  return out;
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

// The job file parser has refused absolute paths and "..".
std::string resolve(const std::string& dir, const std::string& p) { return dir + "/" + p; }

// Writes an output beside the job file without following a symlink
// anywhere under its directory: each directory of `rel` is opened
// O_NOFOLLOW, the bytes go to a new file (O_EXCL) that is then renamed onto
// the last component, so a symlink planted there is replaced, never
// written through, and a reader never sees half a file.
void write_output(const std::string& dir, const std::string& rel, const std::vector<uint8_t>& data) {
  const std::string path = resolve(dir, rel);
  auto fail = [&](const std::string& what) {
    throw CliError(Exit::kFailed, "cannot write " + path + ": " + what + ": " + strerror(errno));
  };
  drv::UniqueFd at(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!at) fail("cannot open " + dir);
  size_t start = 0;
  for (size_t slash; (slash = rel.find('/', start)) != std::string::npos; start = slash + 1) {
    if (slash == start) continue;
    const std::string part = rel.substr(start, slash - start);
    drv::UniqueFd next(::openat(at.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) fail(part + " is not a directory (or a symlink)");
    at = std::move(next);
  }
  const std::string name = rel.substr(start);
  const std::string tmp = "." + name + ".vtrn-" + std::to_string(getpid());
  drv::UniqueFd fd(::openat(at.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd) fail("cannot create " + tmp);
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd.get(), data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      unlinkat(at.get(), tmp.c_str(), 0);
      errno = e;
      fail("write");
    }
    off += size_t(n);
  }
  if (renameat(at.get(), tmp.c_str(), at.get(), name.c_str()) != 0) {
    const int e = errno;
    unlinkat(at.get(), tmp.c_str(), 0);
    errno = e;
    fail("rename");
  }
}

struct SubmitOptions {
  std::string file;
  int64_t chip = -1;
  bool wait = false;
  bool json = false;
};

void run_submit(const SubmitOptions& o) {
  std::ifstream in(o.file, std::ios::binary);
  if (!in) throw CliError(Exit::kFailed, "cannot read " + o.file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  drv::Result<JobSpec> parsed = parse_job_file(text);
  if (!parsed.ok()) throw CliError(Exit::kFailed, o.file + ": " + parsed.error().detail());
  JobSpec& spec = parsed.value();
  const std::string dir = dir_of(o.file);
  for (size_t i = 0; i < spec.buffers.size(); ++i) {
    JobBufferSpec& b = spec.buffers[i];
    const std::string p = "/buffers/" + std::to_string(i);
    if (!b.file.empty()) {
      const std::string path = resolve(dir, b.file);
      std::ifstream f(path, std::ios::binary);
      if (!f) throw CliError(Exit::kFailed, o.file + ": " + p + "/file: cannot read " + path);
      b.data.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
      if (b.data.empty()) throw CliError(Exit::kFailed, o.file + ": " + p + "/file: " + path + " is empty");
      if (b.bytes_given && b.bytes != b.data.size())
        throw CliError(Exit::kFailed, o.file + ": " + p + "/bytes: " + std::to_string(b.bytes) + " but " + path +
                                          " holds " + std::to_string(b.data.size()));
      b.bytes = b.data.size();
    } else if (b.has_values) {
      b.data.resize(b.values.size() * 4);
      memcpy(b.data.data(), b.values.data(), b.data.size());
    }
  }
  if (const drv::Error err = check_job_shapes(spec); !err.ok())
    throw CliError(Exit::kFailed, o.file + ": " + err.detail());
  const uint32_t chip = uint32_t(o.chip >= 0 ? o.chip : spec.chip >= 0 ? spec.chip : 0);
  // Without --wait this command ends right after the answer, so the job is
  // detached: it must not be cancelled as its client leaves. With --wait,
  // interrupting the command cancels the job (client_gone).
  Submitted s = submit_job(spec, chip, o.wait, /*detach=*/!o.wait);
  // Outputs land next to the job file, only for a job that finished.
  json written = json::array();
  if (s.job["state"] == "DONE") {
    for (const auto& [name, data] : s.outputs) {
      for (const auto& b : spec.buffers) {
        if (b.name != name || b.output.empty()) continue;
        const std::string path = resolve(dir, b.output);
        write_output(dir, b.output, data);
        written.push_back({{"buffer", name}, {"file", path}, {"bytes", data.size()}});
      }
    }
  }
  const json doc = {{"job", s.job}, {"outputs", written}};
  if (o.wait && o.json) throw_for_end(*s.resp->job_submit->job, doc);
  if (o.json) {
    print_json(doc);
  } else {
    print_job_detail(s.job);
    for (const auto& w : written)
      std::cout << "wrote " << w["file"].get<std::string>() << " (" << format_bytes(w["bytes"].get<uint64_t>())
                << ")\n";
  }
  if (o.wait) throw_for_end(*s.resp->job_submit->job);
}

// Run.

struct RunOptions {
  std::string kernel;
  uint32_t m = 256, n = 256, k = 256;
  std::string dtype = "fp32";
  uint32_t chip = 0;
  uint32_t cores = 0;
  std::string engine = "default";
  uint64_t seed = 0;
  bool seed_given = false;
  bool specials = false;
  uint32_t timeout_ms = 0;
  bool json = false;
};

// A buffer of the job `vtrn run` builds.
JobBufferSpec buf(const char* name, std::vector<uint8_t> data, uint64_t bytes = 0, bool output = false) {
  JobBufferSpec b;
  b.name = name;
  b.bytes = data.empty() ? bytes : data.size();
  b.data = std::move(data);
  if (output) b.output = name;
  return b;
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  memcpy(out.data(), v.data(), out.size());
  return out;
}

void run_kernel(const RunOptions& o) {
  Vtrn__Types__JobKernel kernel;
  if (!parse_kernel(o.kernel, &kernel)) throw CliError(Exit::kUsage, "unknown kernel " + o.kernel);
  const bool gemm = kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GEMM;
  Vtrn__Types__JobDType dt = VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32;
  vtrn::num::DType ndt = vtrn::num::DType::kF32;
  if (!parse_dtype(o.dtype, &dt) || !vtrn::num::parse_dtype(dtype_name(dt), &ndt))
    throw CliError(Exit::kUsage, "--dtype " + o.dtype + ": expected fp32, bf16, fp8-e4m3, fp8-e5m2 or mxfp4");
  if (!gemm && dt != VTRN__TYPES__JOB_DTYPE__JOB_DTYPE_F32)
    throw CliError(Exit::kUsage, "--dtype: " + o.kernel + " takes fp32 only");
  if (gemm) {
    const vtrn::Error e = vtrn::num::check_gemm(ndt, o.m, o.n, o.k);
    if (!e.ok()) throw CliError(Exit::kUsage, std::string("gemm: ") + e.detail());
  }
  const uint64_t seed = o.seed_given ? o.seed : std::random_device{}();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto randv = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = uni(rng);
    return v;
  };

  JobSpec spec;
  spec.name = "run-" + o.kernel;
  spec.max_cores = o.cores;
  spec.timeout_ms = o.timeout_ms;
  if (!vtrn::proto::parse_engine(o.engine, &spec.engine))
    throw CliError(Exit::kUsage, "--engine " + o.engine + ": expected tensor, cores or default");
  JobStepSpec st;
  st.kernel = kernel;
  st.dtype = dt;
  st.m = o.m;
  st.n = o.n;
  st.k = gemm ? o.k : 0;
  std::vector<float> a32, b32;
  std::vector<uint8_t> aq, bq, as, bs;
  if (gemm) {
    a32 = randv(size_t(o.m) * o.k);
    b32 = randv(size_t(o.n) * o.k);
    if (o.specials) {
      // One NaN and one infinity of each sign in the inputs: where the
      // format has them they must reach C as IEEE arithmetic says; where it
      // does not (E4M3 inf, E2M1) quantization decides, the same on both sides.
      a32[0] = NAN;
      if (o.m > 1 && o.k > 1) a32[size_t(o.k) + 1] = INFINITY;
      b32[b32.size() - 1] = -INFINITY;
    }
    aq.resize(vtrn::num::operand_bytes(ndt, o.m, o.k));
    bq.resize(vtrn::num::operand_bytes(ndt, o.n, o.k));
    as.resize(vtrn::num::scale_bytes(ndt, o.m, o.k));
    bs.resize(vtrn::num::scale_bytes(ndt, o.n, o.k));
    vtrn::num::quantize_operand(ndt, a32.data(), o.m, o.k, aq.data(), as.empty() ? nullptr : as.data());
    vtrn::num::quantize_operand(ndt, b32.data(), o.n, o.k, bq.data(), bs.empty() ? nullptr : bs.data());
    spec.buffers.push_back(buf("a", aq));
    spec.buffers.push_back(buf("b", bq));
    st.a = "a";
    st.b = "b";
    if (!as.empty()) {
      spec.buffers.push_back(buf("a_scales", as));
      spec.buffers.push_back(buf("b_scales", bs));
      st.a_scales = "a_scales";
      st.b_scales = "b_scales";
    }
    spec.buffers.push_back(buf("c", {}, uint64_t(o.m) * o.n * 4, true));
    st.out = "c";
  } else {
    a32 = randv(size_t(o.m) * o.n);
    if (kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GELU || kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_SOFTMAX)
      for (float& x : a32) x *= 4.0f;
    if (o.specials) {
      a32[0] = NAN;
      if (a32.size() > 2) a32[a32.size() / 2] = INFINITY;
      if (a32.size() > 3) a32[a32.size() - 1] = -INFINITY;
    }
    spec.buffers.push_back(buf("a", bytes_of(a32)));
    st.a = "a";
    if (kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_ADD || kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_MUL) {
      b32 = randv(a32.size());
      spec.buffers.push_back(buf("b", bytes_of(b32)));
      st.b = "b";
    }
    const uint64_t out_bytes = kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_SUM ? uint64_t(o.m) * 4 : uint64_t(o.m) * o.n * 4;
    spec.buffers.push_back(buf("out", {}, out_bytes, true));
    st.out = "out";
  }
  spec.steps.push_back(st);
  if (const drv::Error err = check_job_shapes(spec); !err.ok())
    throw CliError(Exit::kFailed, "internal: " + err.detail());

  Submitted s = submit_job(spec, o.chip, /*wait=*/true, /*detach=*/false);
  const Vtrn__Api__JobInfo& info = *s.resp->job_submit->job;
  json doc = {{"kernel", o.kernel}, {"chip", o.chip}, {"m", o.m}, {"n", o.n}, {"seed", seed}, {"job", s.job}};
  if (gemm) {
    doc["k"] = o.k;
    doc["dtype"] = dtype_name(dt);
  }
  if (info.state != VTRN__TYPES__JOB_STATE__JOB_STATE_DONE) throw_for_end(info, o.json ? doc : json::object());
  if (s.outputs.size() != 1) throw CliError(Exit::kFailed, "vtrnd returned " + std::to_string(s.outputs.size()) + " outputs, expected 1");
  const std::vector<uint8_t>& out = s.outputs[0].second;
  const uint64_t want = spec.buffers.back().bytes;
  if (out.size() != want)
    throw CliError(Exit::kFailed, "output of " + std::to_string(out.size()) + " bytes, expected " + std::to_string(want));
  std::vector<float> c(out.size() / 4);
  memcpy(c.data(), out.data(), out.size());

  bool ok = true;
  json check;
  if (gemm) {
    vtrn::kern::GemmArgs args{ndt, o.m, o.n, o.k, aq.data(), as.empty() ? nullptr : as.data(),
                              bq.data(), bs.empty() ? nullptr : bs.data(), c.data()};
    vtrn::kern::GemmCheck chk;
    ok = vtrn::kern::gemm_verify(args, &chk);
    check = {{"elements", chk.elements},        {"bad", chk.bad},
             {"max_abs_err", chk.max_abs_err},  {"max_rel_err", chk.max_rel_err},
             {"max_bound_ratio", chk.max_bound_ratio}};
    if (!ok) check["first_bad"] = chk.first_bad;
  } else {
    // The host build of the firmware's kernels is the reference. Add and
    // multiply are single IEEE operations and softmax and sum accumulate in
    // a fixed order, so they must match bit for bit; GELU calls the C
    // library's erff, which may differ by a few ulp between picolibc and
    // glibc.
    std::vector<float> ref(c.size());
    switch (kernel) {
      case VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_ADD: vtrn::kern::add_range(a32.data(), b32.data(), ref.data(), 0, ref.size()); break;
      case VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_MUL: vtrn::kern::mul_range(a32.data(), b32.data(), ref.data(), 0, ref.size()); break;
      case VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GELU: vtrn::kern::gelu_range(a32.data(), ref.data(), 0, ref.size()); break;
      case VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_SOFTMAX: vtrn::kern::softmax_rows(a32.data(), ref.data(), o.n, 0, o.m); break;
      default: vtrn::kern::sum_rows(a32.data(), ref.data(), o.n, 0, o.m); break;
    }
    const double tol = kernel == VTRN__TYPES__JOB_KERNEL__JOB_KERNEL_GELU ? 1e-6 : 0.0;
    uint64_t bad = 0;
    double max_abs = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      const double x = c[i], r = ref[i];
      if (isnan(r) || isnan(x)) {
        bad += isnan(r) != isnan(x);
        continue;
      }
      if (isinf(r) || isinf(x)) {
        bad += x != r;
        continue;
      }
      const double e = fabs(x - r);
      max_abs = std::max(max_abs, e);
      if (e > tol * std::max(1.0, fabs(r))) ++bad;
    }
    ok = bad == 0;
    check = {{"elements", c.size()}, {"bad", bad}, {"max_abs_err", max_abs}, {"tolerance", tol}};
  }
  const double run_ns = double(info.chip_run_ns);
  const double flops = gemm ? double(vtrn::kern::gemm_flops(o.m, o.n, o.k)) : double(info.flops);
  doc["verified"] = ok;
  doc["check"] = check;
  doc["gflops"] = run_ns > 0 ? flops / run_ns : 0.0;
  doc["end_to_end_gflops"] = info.latency_ns ? flops / double(info.latency_ns) : 0.0;
  doc["modeled_gflops"] = info.chip_modeled_ns ? flops / double(info.chip_modeled_ns) : 0.0;
  const std::string mismatch = "chip result does not match the host reference (" +
                               std::to_string(check["bad"].get<uint64_t>()) + " elements)";
  if (o.json) {
    if (!ok) throw CliError(Exit::kFailed, mismatch).with_context(doc);
    print_json(doc);
  } else {
    std::string what = o.kernel + " " + std::to_string(o.m) + "x" + std::to_string(o.n);
    if (gemm) what += "x" + std::to_string(o.k) + " " + dtype_name(dt);
    const std::string where = info.engine == VTRN__TYPES__JOB_ENGINE__JOB_ENGINE_TENSOR
                                  ? std::to_string(info.engines_used) + " tensor engine(s)"
                                  : std::to_string(info.cores_used) + " core(s)";
    std::cout << what << " on chip " << o.chip << ": job " << info.id << " DONE on " << where << ", seed " << seed
              << "\n";
    std::cout << "  engine   " << vtrn::proto::engine_name(info.engine) << "\n";
    std::cout << "  time     chip " << (info.chip_run_ns ? format_ns(info.chip_run_ns) : "-") << " wall, "
              << (info.chip_modeled_ns ? format_ns(info.chip_modeled_ns) : "-") << " modeled; submit->end "
              << format_ns(info.latency_ns) << " (staging " << format_ns(info.stage_in_ns) << ", read-back "
              << format_ns(info.stage_out_ns) << ")\n";
    if (gemm || flops > 0)
      std::cout << "  speed    " << fixed(doc["gflops"].get<double>(), 3) << " GFLOP/s on the chip, "
                << fixed(doc["end_to_end_gflops"].get<double>(), 3) << " GFLOP/s end to end\n";
    std::cout << "  error    max " << sci(check["max_abs_err"].get<double>());
    if (gemm) std::cout << " (" << fixed(check["max_bound_ratio"].get<double>(), 3) << " of the bound)";
    std::cout << ", " << check["bad"].get<uint64_t>() << " of " << check["elements"].get<uint64_t>()
              << " elements outside -> " << (ok ? "verified" : "MISMATCH") << "\n";
  }
  if (!ok) throw CliError(Exit::kFailed, mismatch);
}

// List, show, wait, cancel.

struct ListOptions {
  std::string chip;
  bool active = false;
  bool json = false;
};

void run_list(const ListOptions& o) {
  Vtrn__Api__JobListRequest l = VTRN__API__JOB_LIST_REQUEST__INIT;
  if (!o.chip.empty()) {  // unset: every chip
    l.select_case = VTRN__API__JOB_LIST_REQUEST__SELECT_CHIP;
    l.chip = int32_t(std::stoul(o.chip));
  }
  l.active_only = o.active;
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  req.body_case = VTRN__API__REQUEST__BODY_JOB_LIST;
  req.job_list = &l;
  DaemonConnection conn = DaemonConnection::open();
  drv::ResponsePtr r = conn.call(&req, VTRN__API__RESPONSE__BODY_JOB_LIST);
  json jobs = json::array();
  for (size_t i = 0; i < r->job_list->n_jobs; ++i) jobs.push_back(job_json(*r->job_list->jobs[i]));
  if (o.json) {
    print_json({{"all_tenants", bool(r->job_list->all_tenants)}, {"jobs", jobs}});
  } else if (jobs.empty()) {
    std::cout << "no jobs\n";
  } else {
    print_job_table(jobs);
  }
}

struct IdOptions {
  uint64_t id = 0;
  uint32_t timeout_ms = 0;
  bool json = false;
};

enum class IdVerb { kShow, kWait, kCancel };

void run_id(const IdOptions& o, IdVerb verb) {
  Vtrn__Api__Request req = VTRN__API__REQUEST__INIT;
  Vtrn__Api__JobShowRequest sh = VTRN__API__JOB_SHOW_REQUEST__INIT;
  Vtrn__Api__JobWaitRequest wt = VTRN__API__JOB_WAIT_REQUEST__INIT;
  Vtrn__Api__JobCancelRequest cn = VTRN__API__JOB_CANCEL_REQUEST__INIT;
  Vtrn__Api__Response__BodyCase want = VTRN__API__RESPONSE__BODY_JOB_SHOW;
  int timeout = kCallTimeoutMs;
  switch (verb) {
    case IdVerb::kShow:
      sh.job_id = o.id;
      req.body_case = VTRN__API__REQUEST__BODY_JOB_SHOW;
      req.job_show = &sh;
      break;
    case IdVerb::kWait:
      wt.job_id = o.id;
      wt.timeout_ms = o.timeout_ms;
      req.body_case = VTRN__API__REQUEST__BODY_JOB_WAIT;
      req.job_wait = &wt;
      want = VTRN__API__RESPONSE__BODY_JOB_WAIT;
      // Without a limit the job's own timeout (at most 10 minutes) ends it.
      timeout = o.timeout_ms ? int(o.timeout_ms) + kWaitSlackMs : 600000 + kWaitSlackMs;
      break;
    case IdVerb::kCancel:
      cn.job_id = o.id;
      req.body_case = VTRN__API__REQUEST__BODY_JOB_CANCEL;
      req.job_cancel = &cn;
      want = VTRN__API__RESPONSE__BODY_JOB_CANCEL;
      break;
  }
  DaemonConnection conn = DaemonConnection::open();
  drv::ResponsePtr r = conn.call(&req, want, timeout);
  const Vtrn__Api__JobInfo* j = verb == IdVerb::kShow   ? r->job_show->job
                                : verb == IdVerb::kWait ? r->job_wait->job
                                                        : r->job_cancel->job;
  if (j == nullptr) throw CliError(Exit::kFailed, "vtrnd answered without the job");
  const json doc = job_json(*j);
  if (verb == IdVerb::kWait && o.json) throw_for_end(*j, doc);
  if (o.json) {
    print_json(doc);
  } else {
    print_job_detail(doc);
  }
  if (verb == IdVerb::kWait) throw_for_end(*j);
}

}  // namespace

void add_jobs_commands(CLI::App& app, Action* action) {
  auto sub = std::make_shared<SubmitOptions>();
  CLI::App* s = app.add_subcommand("submit", "Submit a job described in a JSON file (see host-tools/README.md)");
  s->add_option("file", sub->file, "Job file")->required()->check(CLI::ExistingFile);
  s->add_option("--chip", sub->chip, "Chip id (default: the file's \"chip\", else 0)")->check(CLI::Range(0, 1 << 20));
  s->add_flag("--wait", sub->wait,
              "Wait for the end, write the outputs, exit non-zero unless DONE (without it the job runs "
              "detached and its outputs are not kept)");
  s->add_flag("--json", sub->json, "Print one JSON document instead of text");
  s->callback([sub, action] { *action = [sub] { run_submit(*sub); }; });

  CLI::App* run = app.add_subcommand("run", "Run one kernel on generated data and verify it against the host reference");
  run->require_subcommand(1);
  for (const char* k : {"gemm", "add", "mul", "gelu", "softmax", "sum"}) {
    auto ro = std::make_shared<RunOptions>();
    ro->kernel = k;
    const bool gemm = std::string(k) == "gemm";
    CLI::App* r = run->add_subcommand(k, gemm ? "C[m,n] = A[m,k] . B[n,k]^T with fp32 accumulation"
                                              : std::string("f32 ") + k + " over an m x n matrix");
    r->add_option("--m", ro->m, "Rows")->check(CLI::Range(1u, 65536u));
    r->add_option("--n", ro->n, "Columns")->check(CLI::Range(1u, 65536u));
    if (gemm) {
      r->add_option("--k", ro->k, "Inner dimension (a multiple of 32 for mxfp4)")->check(CLI::Range(1u, 65536u));
      r->add_option("--dtype", ro->dtype, "Input type")
          ->check(CLI::IsMember({"fp32", "f32", "bf16", "fp8-e4m3", "fp8-e5m2", "mxfp4"}));
    }
    r->add_option("--chip", ro->chip, "Chip id")->check(chip_id_validator());
    r->add_option("--cores", ro->cores, "NeuronCores to use (0: all); with the tensor engines, engines to use")
        ->check(CLI::Range(0u, 1024u));
    if (gemm)
      r->add_option("--engine", ro->engine, "Where the GEMM runs: tensor engines, cores, or the chip's default")
          ->check(CLI::IsMember({"tensor", "cores", "default"}));
    auto* seed = r->add_option("--seed", ro->seed, "Random seed (default: a fresh one, printed)");
    r->add_flag("--specials", ro->specials, "Put NaN and infinities into the inputs");
    r->add_option("--timeout-ms", ro->timeout_ms, "Job timeout (0: vtrnd's default)")->check(CLI::Range(0u, 600000u));
    r->add_flag("--json", ro->json, "Print one JSON document instead of text");
    r->callback([ro, seed, action] {
      ro->seed_given = seed->count() > 0;
      *action = [ro] { run_kernel(*ro); };
    });
  }

  auto lo = std::make_shared<ListOptions>();
  CLI::App* l = app.add_subcommand("jobs", "List active and recent jobs: your own (every tenant's for the admin)");
  l->add_option("chip", lo->chip, "Only this chip")->check(chip_id_validator());
  l->add_flag("--active", lo->active, "Only QUEUED and RUNNING jobs");
  l->add_flag("--json", lo->json, "Print one JSON document instead of text");
  l->callback([lo, action] { *action = [lo] { run_list(*lo); }; });

  CLI::App* job = app.add_subcommand("job", "One job of yours (any tenant's for the admin): show, wait for or cancel it");
  job->require_subcommand(1);
  const std::pair<const char*, IdVerb> verbs[] = {{"show", IdVerb::kShow}, {"wait", IdVerb::kWait}, {"cancel", IdVerb::kCancel}};
  for (const auto& [name, verb] : verbs) {
    auto io = std::make_shared<IdOptions>();
    const char* help = verb == IdVerb::kShow   ? "Show a job"
                       : verb == IdVerb::kWait ? "Wait until a job ends (exit non-zero unless DONE)"
                                               : "Cancel a queued or running job";
    CLI::App* c = job->add_subcommand(name, help);
    c->add_option("id", io->id, "Job id")->required()->check(CLI::Range(uint64_t(1), uint64_t(1) << 62));
    if (verb == IdVerb::kWait) c->add_option("--timeout-ms", io->timeout_ms, "Give up after this long (0: never)");
    c->add_flag("--json", io->json, "Print one JSON document instead of text");
    const IdVerb v = verb;
    c->callback([io, v, action] { *action = [io, v] { run_id(*io, v); }; });
  }
}

}  // namespace tools
