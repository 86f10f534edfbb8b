// bench_gpu_staging: what the pinned staging ring (CopyOptions::pinned_staging, issue 22
// item 6) costs against decoding straight into pinned buffers, in the same run.
//
//   direct   host batches from a pinned BufferPool (the device job's pool when its
//            footprint fits --pinned-direct-mib): the copy stage queues one DMA per batch
//   staged   host batches in pageable memory (decode's ordinary buffers): the copy stage
//            memcpys each into one of 3 pinned buffers on its own thread, then the DMA
//
// Figures per batch: the copy stage thread's CPU time (the staging memcpy lands there),
// the process's CPU time (on the CPU device this includes its worker's "DMA" memcpy),
// and wall time; ratio = staged / direct. One JSON line per configuration on stdout, a
// table on stderr.
//
//   bench_gpu_staging [--device cpu|cuda:N] [--batch N] [--batches N]

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <string>
#include <vector>

#include "transport/device/device_copy.h"

namespace {

namespace bt = brigade::transport;
using brigade::media::DType;
using brigade::media::Tensor;

double thread_cpu() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}
double process_cpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& v) { return static_cast<double>(v.tv_sec) + v.tv_usec * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}
double wall() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Figures {
  double thread_ms = 0, process_ms = 0, wall_ms = 0;
};

// `batches` copies, two in flight (the consumer waits for the older one), after one
// warm-up batch; `next` gives each host batch.
template <class Next>
Figures run(const bt::CopyStage& stage, int batches, Next next) {
  stage(next()).wait();
  std::deque<bt::DeviceBatch> flight;
  const double t0 = thread_cpu(), p0 = process_cpu(), w0 = wall();
  for (int i = 0; i < batches; ++i) {
    flight.push_back(stage(next()));
    if (flight.size() > 2) {
      flight.front().wait();
      flight.pop_front();
    }
  }
  for (auto& b : flight) b.wait();
  const double t1 = thread_cpu(), p1 = process_cpu(), w1 = wall();
  return {(t1 - t0) * 1e3 / batches, (p1 - p0) * 1e3 / batches, (w1 - w0) * 1e3 / batches};
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cpu";
  int batch = 128, batches = 40;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--device") device_name = argv[i + 1];
    if (flag == "--batch") batch = std::atoi(argv[i + 1]);
    if (flag == "--batches") batches = std::atoi(argv[i + 1]);
  }
  const std::vector<std::int64_t> shape{batch, 224, 224, 3};
  const auto device = bt::open_device(bt::parse_device(device_name));
  const std::size_t bytes = static_cast<std::size_t>(batch) * 224 * 224 * 3;

  auto pinned = std::make_shared<bt::BufferPool>(
      device, bt::BufferPool::Memory::pinned_host,
      bt::BufferPool::Options{.max_buffers = 4, .min_capacity = bytes});
  pinned->reserve(4);
  bt::CopyStage direct_stage(device, {.device_buffers = 4, .full_batch = shape});
  const auto direct = run(direct_stage, batches, [&] {
    return Tensor::empty(DType::uint8, shape, pinned->allocator());  // decode writes it
  });

  std::vector<Tensor> pageable;
  for (int i = 0; i < 4; ++i) {
    pageable.push_back(Tensor::empty(DType::uint8, shape));
    std::memset(pageable.back().data(), i, bytes);  // faulted in, as decode's output is
  }
  bt::CopyStage staged_stage(device,
                             {.device_buffers = 4, .full_batch = shape, .pinned_staging = 3});
  int k = 0;
  const auto staged = run(staged_stage, batches, [&] { return pageable[k++ % 4]; });

  const double mb = static_cast<double>(bytes) / 1e6;
  std::printf(
      "{\"bench\": \"pinned_staging\", \"device\": \"%s\", \"batch_mb\": %.1f, \"batches\": %d, "
      "\"direct_copy_thread_ms\": %.3f, \"staged_copy_thread_ms\": %.3f, "
      "\"direct_process_cpu_ms\": %.3f, \"staged_process_cpu_ms\": %.3f, "
      "\"direct_wall_ms\": %.3f, \"staged_wall_ms\": %.3f, \"ratio_process_cpu\": %.3f, "
      "\"staging_memcpy_gb_s\": %.2f, \"staged_copies\": %llu}\n",
      device_name.c_str(), mb, batches, direct.thread_ms, staged.thread_ms, direct.process_ms,
      staged.process_ms, direct.wall_ms, staged.wall_ms,
      direct.process_ms > 0 ? staged.process_ms / direct.process_ms : 0.0,
      staged.thread_ms > direct.thread_ms ? mb / 1e3 / ((staged.thread_ms - direct.thread_ms) / 1e3)
                                          : 0.0,
      static_cast<unsigned long long>(staged_stage.staged_copies()));
  std::fprintf(stderr,
               "pinned staging on %s, %.1f MB batches\n"
               "            copy thread CPU   process CPU   wall      (ms per batch)\n"
               "  direct    %8.3f          %8.3f      %8.3f\n"
               "  staged    %8.3f          %8.3f      %8.3f\n",
               device_name.c_str(), mb, direct.thread_ms, direct.process_ms, direct.wall_ms,
               staged.thread_ms, staged.process_ms, staged.wall_ms);
  return 0;
}
