// bench_gpu: the GPU path of transport/ against plain CUDA, in the same run.
//
//   device     what was measured on (GPU, driver, runtime, NCCL)
//   h2d        the copy stage's host-to-device bandwidth against the real ceiling, a
//              pipelined cudaMemcpyAsync loop (3 pinned sources, one stream, no host
//              wait per copy; target ratio ≥ 0.9), and against a synchronous cudaMemcpy
//              per batch (ratio_vs_sync, the old baseline)
//   overlap    a training loop on the legacy default stream (a busy kernel per batch,
//              1.5× the batch's copy time) while the copy stage feeds it: the share of
//              the copy time hidden behind compute (target ≥ 0.8)
//   normalize  the kernel's images/s against the copy's, and copy + normalize (uint8 on
//              the link) against copying the same images already as float32
//   nccl       broadcast bandwidth through DeviceGroup among the GPUs present; with one
//              GPU, whether NCCL accepts two ranks on one GPU in one process
//   blocking   how long cudaFree, cudaFreeHost, cudaMalloc, cudaHostAlloc and the stream-
//              ordered cudaMallocAsync/cudaFreeAsync take while a kernel runs on another
//              stream (a training step): a call that waits for it is one the copy path
//              must never make per batch (issue 22 item 6)
//   staging    the copy stage from pageable batches through its pinned staging ring
//              (CopyOptions::pinned_staging) against batches already pinned (issue 22
//              item 6: what the pinned bound costs in bandwidth)
//   events     cudaEventCreate + record + destroy per batch against recording a pooled
//              event, and cudaEventQuery, in microseconds per call
//
// One JSON line per configuration on stdout, a table on stderr. A section that fails
// prints {"bench": ..., "error": ...} and the exit code is 1. Sized to run in well under
// a minute on one H200 (bench/gpu_check.sh runs it).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "bench/bench_gpu_spin.h"
#include "transport/device/device_copy.h"
#include "transport/device/device_group.h"

namespace {

namespace bt = brigade::transport;
using brigade::media::DType;
using brigade::media::Tensor;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ")");
  }
}

// One JSON object, built field by field.
class Json {
 public:
  explicit Json(const std::string& bench) { add("bench", bench); }
  Json& add(const std::string& key, const std::string& value) {
    std::string escaped;
    for (char c : value) {
      if (c == '"' || c == '\\') escaped += '\\';
      if (c == '\n') {
        escaped += "\\n";
        continue;
      }
      escaped += c;
    }
    return raw(key, "\"" + escaped + "\"");
  }
  Json& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  Json& add(const std::string& key, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", value);
    return raw(key, buf);
  }
  Json& add(const std::string& key, long long value) { return raw(key, std::to_string(value)); }
  Json& add(const std::string& key, int value) { return raw(key, std::to_string(value)); }
  Json& add(const std::string& key, bool value) { return raw(key, value ? "true" : "false"); }
  void print() const {
    std::printf("%s}\n", body_.c_str());
    std::fflush(stdout);
  }

 private:
  Json& raw(const std::string& key, const std::string& value) {
    body_ += (body_.empty() ? "{" : ", ") + ("\"" + key + "\": ") + value;
    return *this;
  }
  std::string body_;
};

constexpr std::size_t kImageBatch = 32 * 224 * 224 * 3;  // a batch of 32 eval224 images

Tensor filled_tensor(bt::BufferPool& pool, std::vector<std::int64_t> shape, int seed) {
  auto t = Tensor::empty(DType::uint8, std::move(shape), pool.allocator());
  auto* p = t.data_as<std::uint8_t>();
  for (std::size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<std::uint8_t>(i * 13 + seed);
  return t;
}

// Seconds for `iterations` batches through the copy stage; the consumer keeps the last
// two (a training loop's current and next batch) and, given a stream, orders it after
// each copy and runs `consume` on it.
double time_copy_stage(const bt::CopyStage& stage, const std::vector<Tensor>& inputs,
                       int iterations, void* stream = nullptr,
                       const std::function<void()>& consume = {}) {
  std::deque<bt::DeviceBatch> window;
  const double t0 = now();
  for (int i = 0; i < iterations; ++i) {
    window.push_back(stage(inputs[i % inputs.size()]));
    if (consume) {
      window.back().use_on(stream);
      consume();
    }
    if (window.size() > 2) window.pop_front();
  }
  window.back().wait();
  if (consume) cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "sync consumer");
  return now() - t0;
}

void bench_device() {
  int count = 0, driver = 0, runtime = 0;
  cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  cuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  cudaDeviceProp prop{};
  cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  Json j("device");
  j.add("gpus", count).add("name", prop.name).add("sms", prop.multiProcessorCount);
  j.add("driver", driver).add("runtime", runtime);
  try {
    j.add("nccl",
          static_cast<long long>(bt::new_device_group_id(bt::DeviceKind::cuda, 1).nccl_version));
  } catch (const std::exception& e) {
    j.add("nccl_error", e.what());
  }
  j.print();
  std::fprintf(stderr, "%-10s %s, %d GPU(s), %d SMs, driver %d, runtime %d\n", "device", prop.name,
               count, prop.multiProcessorCount, driver, runtime);
}

// The real ceiling of the copy: cudaMemcpyAsync from `sources` pinned buffers in turn on
// one non-blocking stream, one synchronization at the end.
double time_pipelined(std::size_t bytes, int iterations, int sources) {
  std::vector<void*> host(static_cast<std::size_t>(sources), nullptr);
  void* dev = nullptr;
  cudaStream_t stream = nullptr;
  for (auto& h : host) {
    cuda(cudaHostAlloc(&h, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    std::memset(h, 1, bytes);
  }
  cuda(cudaMalloc(&dev, bytes * 2), "cudaMalloc");
  cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  auto* out = static_cast<char*>(dev);
  cuda(cudaMemcpyAsync(out, host[0], bytes, cudaMemcpyHostToDevice, stream), "warm-up");
  cuda(cudaStreamSynchronize(stream), "sync");
  const double t0 = now();
  for (int i = 0; i < iterations; ++i) {
    cuda(cudaMemcpyAsync(out + (i % 2) * bytes, host[static_cast<std::size_t>(i % sources)], bytes,
                         cudaMemcpyHostToDevice, stream),
         "cudaMemcpyAsync");
  }
  cuda(cudaStreamSynchronize(stream), "sync");
  const double seconds = now() - t0;
  cudaStreamDestroy(stream);
  cudaFree(dev);
  for (auto* h : host) cudaFreeHost(h);
  return seconds;
}

void bench_h2d(const std::shared_ptr<bt::Device>& device, std::size_t bytes, int iterations) {
  void* host = nullptr;
  void* dev = nullptr;
  cuda(cudaHostAlloc(&host, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  cuda(cudaMalloc(&dev, bytes), "cudaMalloc");
  std::memset(host, 1, bytes);
  cuda(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "warm-up");
  double t0 = now();
  for (int i = 0; i < iterations; ++i) {
    cuda(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  const double plain = now() - t0;
  cudaFree(dev);
  cudaFreeHost(host);

  bt::BufferPool pool(device, bt::BufferPool::Memory::pinned_host, {.max_buffers = 3});
  bt::CopyStage stage(device, {.device_buffers = 4});
  std::vector<Tensor> inputs;
  for (int i = 0; i < 3; ++i)
    inputs.push_back(filled_tensor(pool, {static_cast<std::int64_t>(bytes)}, i));
  time_copy_stage(stage, inputs, 4);  // warm-up: device buffers allocated
  const double staged = time_copy_stage(stage, inputs, iterations);

  const double pipelined = time_pipelined(bytes, iterations, 3);
  const double total = static_cast<double>(bytes) * iterations;
  const double ratio = pipelined / staged;
  Json("h2d")
      .add("bytes", static_cast<long long>(bytes))
      .add("iterations", iterations)
      .add("sync_cudamemcpy_gbps", total / plain / 1e9)
      .add("pipelined_cudamemcpyasync_gbps", total / pipelined / 1e9)
      .add("copy_stage_gbps", total / staged / 1e9)
      .add("ratio_vs_sync", plain / staged)
      .add("ratio", ratio)
      .add("target", 0.9)
      .add("pass", ratio >= 0.9)
      .print();
  std::fprintf(stderr,
               "%-10s %9zu B x %4d: sync %6.1f GB/s, pipelined %6.1f GB/s, copy stage %6.1f "
               "GB/s, ratio to pipelined %.3f\n",
               "h2d", bytes, iterations, total / plain / 1e9, total / pipelined / 1e9,
               total / staged / 1e9, ratio);
}

// Issue 22 item 6: the pinned staging ring (pageable decode output memcpy'd into 3
// pinned buffers on the copy thread) against batches already in pinned memory.
void bench_staging(const std::shared_ptr<bt::Device>& device, std::size_t bytes, int iterations) {
  const std::vector<std::int64_t> shape{static_cast<std::int64_t>(bytes)};
  bt::BufferPool pool(device, bt::BufferPool::Memory::pinned_host, {.max_buffers = 3});
  std::vector<Tensor> pinned, pageable;
  for (int i = 0; i < 3; ++i) {
    pinned.push_back(filled_tensor(pool, shape, i));
    pageable.push_back(Tensor::empty(DType::uint8, shape));
    std::memcpy(pageable.back().data(), pinned.back().data(), bytes);
  }
  bt::CopyStage direct_stage(device, {.device_buffers = 4, .full_batch = shape});
  bt::CopyStage staged_stage(device,
                             {.device_buffers = 4, .full_batch = shape, .pinned_staging = 3});
  time_copy_stage(direct_stage, pinned, 4);
  time_copy_stage(staged_stage, pageable, 4);
  const double direct = time_copy_stage(direct_stage, pinned, iterations);
  const double staged = time_copy_stage(staged_stage, pageable, iterations);
  const double total = static_cast<double>(bytes) * iterations;
  Json("staging")
      .add("bytes", static_cast<long long>(bytes))
      .add("iterations", iterations)
      .add("direct_gbps", total / direct / 1e9)
      .add("staged_gbps", total / staged / 1e9)
      .add("ratio", direct / staged)
      .print();
  std::fprintf(stderr, "%-10s %9zu B x %4d: direct %6.1f GB/s, staged %6.1f GB/s, ratio %.3f\n",
               "staging", bytes, iterations, total / direct / 1e9, total / staged / 1e9,
               direct / staged);
}

// Spin cycles that take `seconds` on this GPU, measured rather than taken from the
// nominal clock (clocks boost and throttle).
long long calibrate_spin(double seconds, int blocks) {
  const long long probe = 2'000'000;
  cuda(static_cast<cudaError_t>(launch_spin(probe, blocks, nullptr)), "spin warm-up");
  cuda(cudaDeviceSynchronize(), "sync");
  const double t0 = now();
  for (int i = 0; i < 5; ++i)
    cuda(static_cast<cudaError_t>(launch_spin(probe, blocks, nullptr)), "spin");
  cuda(cudaDeviceSynchronize(), "sync");
  const double per_cycle = (now() - t0) / 5 / probe;
  return static_cast<long long>(seconds / per_cycle);
}

void bench_overlap(const std::shared_ptr<bt::Device>& device, int iterations) {
  int sms = 0;
  cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  const int blocks = sms * 8;  // every multiprocessor busy
  bt::BufferPool pool(device, bt::BufferPool::Memory::pinned_host, {.max_buffers = 3});
  bt::CopyStage stage(device, {.device_buffers = 4});
  std::vector<Tensor> inputs;
  for (int i = 0; i < 3; ++i) inputs.push_back(filled_tensor(pool, {32, 224, 224, 3}, i));
  time_copy_stage(stage, inputs, 4);
  const double copy = time_copy_stage(stage, inputs, iterations);
  const long long cycles = calibrate_spin(1.5 * copy / iterations, blocks);
  auto busy = [&] { cuda(static_cast<cudaError_t>(launch_spin(cycles, blocks, nullptr)), "spin"); };
  double t0 = now();
  for (int i = 0; i < iterations; ++i) busy();
  cuda(cudaStreamSynchronize(nullptr), "sync");
  const double compute = now() - t0;
  const double both = time_copy_stage(stage, inputs, iterations, nullptr, busy);
  const double hidden = std::clamp((copy + compute - both) / copy, 0.0, 1.0);
  Json("overlap")
      .add("batch_bytes", static_cast<long long>(kImageBatch))
      .add("iterations", iterations)
      .add("consumer_stream", "legacy default")
      .add("copy_ms", copy * 1e3)
      .add("compute_ms", compute * 1e3)
      .add("both_ms", both * 1e3)
      .add("hidden", hidden)
      .add("target", 0.8)
      .add("pass", hidden >= 0.8)
      .print();
  std::fprintf(stderr,
               "%-10s copy %.1f ms, compute %.1f ms, both %.1f ms: %.0f%% of the copy hidden\n",
               "overlap", copy * 1e3, compute * 1e3, both * 1e3, hidden * 100);
}

void bench_normalize(const std::shared_ptr<bt::Device>& device, DType dtype, int iterations) {
  const std::vector<std::int64_t> shape{32, 224, 224, 3};
  const bt::NormalizeOptions options{.mean = {0.485f, 0.456f, 0.406f},
                                     .stddev = {0.229f, 0.224f, 0.225f},
                                     .scale = 1.0f / 255.0f,
                                     .dtype = dtype};
  auto job = bt::make_normalize_job(options, shape);
  const std::size_t out_bytes = bt::normalized_bytes(job);
  auto src = device->allocate_device(kImageBatch);
  auto dst = device->allocate_device(out_bytes);
  job.src = static_cast<const std::uint8_t*>(src.get());
  job.dst = dst.get();
  device->normalize(job);
  device->synchronize();
  double t0 = now();
  for (int i = 0; i < iterations; ++i) device->normalize(job);
  device->synchronize();
  const double kernel = now() - t0;

  bt::BufferPool pool(device, bt::BufferPool::Memory::pinned_host, {.max_buffers = 4});
  std::vector<Tensor> inputs;
  for (int i = 0; i < 3; ++i) inputs.push_back(filled_tensor(pool, shape, i));
  bt::CopyStage plain(device, {.device_buffers = 4});
  bt::CopyStage normalizing(device, {.device_buffers = 4, .normalize = options});
  time_copy_stage(plain, inputs, 4);
  time_copy_stage(normalizing, inputs, 4);
  const double copy = time_copy_stage(plain, inputs, iterations);
  const double copy_normalize = time_copy_stage(normalizing, inputs, iterations);
  // The alternative: normalize on the host and copy float32 (4× the bytes).
  auto floats =
      Tensor::empty(DType::uint8, {static_cast<std::int64_t>(kImageBatch * 4)}, pool.allocator());
  std::memset(floats.data(), 0, floats.nbytes());
  time_copy_stage(plain, {floats}, 4);  // warm-up: device buffers of the larger size
  const double copy_float32 = time_copy_stage(plain, {floats}, iterations);

  const double images = 32.0 * iterations;
  Json("normalize")
      .add("dtype", std::string(brigade::media::dtype_name(dtype)))
      .add("layout", "nchw")
      .add("batch", "32x224x224x3 uint8")
      .add("kernel_images_per_s", images / kernel)
      .add("kernel_gbps", (kImageBatch + out_bytes) * iterations / kernel / 1e9)
      .add("copy_images_per_s", images / copy)
      .add("kernel_vs_copy", copy / kernel)
      .add("copy_and_normalize_images_per_s", images / copy_normalize)
      .add("copy_float32_images_per_s", images / copy_float32)
      .print();
  std::fprintf(stderr,
               "%-10s %s: kernel %.0f img/s (%.0f GB/s), copy %.0f img/s (kernel %.1fx faster); "
               "copy+normalize %.0f img/s vs float32 copy %.0f img/s\n",
               "normalize", std::string(brigade::media::dtype_name(dtype)).c_str(), images / kernel,
               (kImageBatch + out_bytes) * iterations / kernel / 1e9, images / copy, copy / kernel,
               images / copy_normalize, images / copy_float32);
}

// Broadcasts `iterations` batches of `bytes` from rank 0 to every rank, one thread per
// rank, each rank on `gpus[r]`; returns seconds (after a warm-up broadcast).
double time_broadcast(const std::vector<int>& gpus, std::size_t bytes, int iterations) {
  const int n = static_cast<int>(gpus.size());
  const auto id = bt::new_device_group_id(bt::DeviceKind::cuda, n);
  std::vector<std::future<double>> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      auto device = bt::open_device({bt::DeviceKind::cuda, gpus[r]});
      bt::DeviceGroup group(device, id, r, {.timeout = std::chrono::seconds(30)});
      bt::BufferPool host(device, bt::BufferPool::Memory::pinned_host, {.max_buffers = 1});
      bt::BufferPool received(device, bt::BufferPool::Memory::device, {.max_buffers = 3});
      bt::CopyStage stage(device, {.device_buffers = 1});
      bt::DeviceBatch batch;
      if (r == 0) batch = stage(filled_tensor(host, {static_cast<std::int64_t>(bytes)}, 1));
      group.broadcast(batch, 0, received).wait();
      const double t0 = now();
      bt::DeviceBatch last;
      for (int i = 0; i < iterations; ++i) last = group.broadcast(batch, 0, received);
      last.wait();
      return now() - t0;
    }));
  }
  double slowest = 0;
  for (auto& f : ranks) slowest = std::max(slowest, f.get());
  return slowest;
}

void bench_nccl(int gpus) {
  const std::size_t bytes = 64 << 20;
  const int iterations = 20;
  if (gpus >= 2) {
    std::vector<int> all(gpus);
    for (int i = 0; i < gpus; ++i) all[i] = i;
    const double t = time_broadcast(all, bytes, iterations);
    Json("nccl_broadcast")
        .add("gpus", gpus)
        .add("bytes", static_cast<long long>(bytes))
        .add("iterations", iterations)
        .add("algbw_gbps", bytes * iterations / t / 1e9)
        .print();
    std::fprintf(stderr, "%-10s %d GPUs: %.1f GB/s (64 MiB batches)\n", "nccl", gpus,
                 bytes * iterations / t / 1e9);
    return;
  }
  Json("nccl_broadcast").add("gpus", gpus).add("skipped", "one GPU").print();
  Json j("nccl_two_ranks_one_gpu");
  try {
    const double t = time_broadcast({0, 0}, bytes, iterations);
    j.add("supported", true).add("algbw_gbps", bytes * iterations / t / 1e9);
    std::fprintf(stderr, "%-10s two ranks on GPU 0: %.1f GB/s\n", "nccl",
                 bytes * iterations / t / 1e9);
  } catch (const std::exception& e) {
    j.add("supported", false).add("error", e.what());
    std::fprintf(stderr, "%-10s two ranks on GPU 0: refused: %s\n", "nccl", e.what());
  }
  j.print();
}

// Each allocation call timed while a ~300 ms kernel runs on another stream: a call that
// waits for the device takes about as long as what is left of the kernel.
void bench_blocking() {
  int sms = 0;
  cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  const int blocks = sms * 8;
  const double kernel_s = 0.3;
  const long long cycles = calibrate_spin(kernel_s, blocks);
  cudaStream_t busy = nullptr, mine = nullptr;
  cuda(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking), "cudaStreamCreate");
  cuda(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking), "cudaStreamCreate");
  constexpr std::size_t kBytes = 64 << 20;
  // Runs `call` once while the kernel runs (launched just before), returns its ms.
  auto during_kernel = [&](const std::function<void()>& call) {
    cuda(cudaDeviceSynchronize(), "sync");
    cuda(static_cast<cudaError_t>(launch_spin(cycles, blocks, busy)), "spin");
    const double t0 = now();
    call();
    const double ms = (now() - t0) * 1e3;
    cuda(cudaDeviceSynchronize(), "sync");
    return ms;
  };
  Json j("blocking");
  j.add("kernel_ms", kernel_s * 1e3);
  std::string table;
  auto report = [&](const char* name, double ms) {
    j.add(std::string(name) + "_ms", ms);
    j.add(std::string(name) + "_waits", ms > kernel_s * 1e3 / 2);
    char line[128];
    std::snprintf(line, sizeof line, " %s %.2f ms%s;", name, ms,
                  ms > kernel_s * 1e3 / 2 ? " (WAITS)" : "");
    table += line;
  };
  void* p = nullptr;
  cuda(cudaMalloc(&p, kBytes), "cudaMalloc");
  report("cudaFree", during_kernel([&] { cuda(cudaFree(p), "cudaFree"); }));
  report("cudaMalloc", during_kernel([&] { cuda(cudaMalloc(&p, kBytes), "cudaMalloc"); }));
  cuda(cudaFree(p), "cudaFree");
  void* h = nullptr;
  report("cudaHostAlloc",
         during_kernel([&] { cuda(cudaHostAlloc(&h, kBytes, 0), "cudaHostAlloc"); }));
  report("cudaFreeHost", during_kernel([&] { cuda(cudaFreeHost(h), "cudaFreeHost"); }));
  report("cudaMallocAsync",
         during_kernel([&] { cuda(cudaMallocAsync(&p, kBytes, mine), "cudaMallocAsync"); }));
  report("cudaFreeAsync", during_kernel([&] { cuda(cudaFreeAsync(p, mine), "cudaFreeAsync"); }));
  cudaStreamDestroy(busy);
  cudaStreamDestroy(mine);
  j.print();
  std::fprintf(stderr, "%-10s while a %.0f ms kernel runs:%s\n", "blocking", kernel_s * 1e3,
               table.c_str());
}

// Per batch, the copy stage creates, records and destroys one event; a pool would only
// record. Microseconds per call, on an idle stream.
void bench_events(int iterations) {
  cudaStream_t stream = nullptr;
  cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const unsigned flags = cudaEventDisableTiming | cudaEventBlockingSync;
  double t0 = now();
  for (int i = 0; i < iterations; ++i) {
    cudaEvent_t e = nullptr;
    cuda(cudaEventCreateWithFlags(&e, flags), "cudaEventCreate");
    cuda(cudaEventRecord(e, stream), "cudaEventRecord");
    cuda(cudaEventDestroy(e), "cudaEventDestroy");
  }
  const double create_record_destroy = (now() - t0) / iterations * 1e6;
  cudaEvent_t pooled = nullptr;
  cuda(cudaEventCreateWithFlags(&pooled, flags), "cudaEventCreate");
  t0 = now();
  for (int i = 0; i < iterations; ++i) cuda(cudaEventRecord(pooled, stream), "cudaEventRecord");
  const double record = (now() - t0) / iterations * 1e6;
  cuda(cudaStreamSynchronize(stream), "sync");
  t0 = now();
  for (int i = 0; i < iterations; ++i) (void)cudaEventQuery(pooled);
  const double query = (now() - t0) / iterations * 1e6;
  cudaEventDestroy(pooled);
  cudaStreamDestroy(stream);
  Json("events")
      .add("iterations", iterations)
      .add("create_record_destroy_us", create_record_destroy)
      .add("record_pooled_us", record)
      .add("query_us", query)
      .print();
  std::fprintf(stderr,
               "%-10s create+record+destroy %.2f us, record (pooled) %.2f us, query %.2f us\n",
               "events", create_record_destroy, record, query);
}

}  // namespace

int main() {
  const auto available = bt::cuda_availability();
  if (available.devices == 0) {
    Json("device").add("skipped", available.reason).print();
    std::fprintf(stderr, "bench_gpu: no GPU: %s\n", available.reason.c_str());
    return 0;
  }
  bool failed = false;
  auto section = [&](const char* name, const std::function<void()>& run) {
    try {
      run();
    } catch (const std::exception& e) {
      failed = true;
      Json(name).add("error", e.what()).print();
      std::fprintf(stderr, "%-10s FAILED: %s\n", name, e.what());
    }
  };
  std::shared_ptr<bt::Device> device;
  section("device", [&] {
    bench_device();
    device = bt::open_device({bt::DeviceKind::cuda, 0});
  });
  if (!device) return 1;
  section("h2d", [&] { bench_h2d(device, kImageBatch, 400); });
  section("h2d", [&] { bench_h2d(device, 64 << 20, 60); });
  section("staging", [&] { bench_staging(device, 256 * 224 * 224 * 3, 60); });
  section("overlap", [&] { bench_overlap(device, 300); });
  section("normalize", [&] { bench_normalize(device, DType::float16, 200); });
  section("normalize", [&] { bench_normalize(device, DType::float32, 200); });
  section("nccl", [&] { bench_nccl(available.devices); });
  section("blocking", [&] { bench_blocking(); });
  section("events", [&] { bench_events(20000); });
  return failed ? 1 : 0;
}
