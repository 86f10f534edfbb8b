#include "transport/device/device.h"

#include <charconv>
#include <stdexcept>

#include "transport/device/detail/device_cpu.h"
#include "transport/device/detail/device_cuda.h"

namespace brigade::transport {

DeviceSpec parse_device(std::string_view text) {
  if (text == "cpu") return {DeviceKind::cpu, 0};
  if (text == "cuda") return {DeviceKind::cuda, 0};
  constexpr std::string_view prefix = "cuda:";
  if (text.starts_with(prefix)) {
    const auto digits = text.substr(prefix.size());
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (!digits.empty() && ec == std::errc() && end == digits.data() + digits.size() &&
        index >= 0) {
      return {DeviceKind::cuda, index};
    }
  }
  throw std::invalid_argument("invalid device '" + std::string(text) +
                              "': expected cpu, cuda or cuda:N (N ≥ 0)");
}

std::string to_string(const DeviceSpec& spec) {
  if (spec.kind == DeviceKind::cpu) return "cpu";
  return "cuda:" + std::to_string(spec.index);
}

bool built_with_cuda() { return detail::cuda_compiled(); }
bool built_with_nccl() { return detail::nccl_compiled(); }
CudaAvailability cuda_availability() { return detail::cuda_probe(); }

DeviceError::DeviceError(std::string library, std::string code, std::string call, DeviceSpec device,
                         std::string message, bool transient)
    : std::runtime_error(library + " error " + code + " (" + message + ") in " + call + " on " +
                         to_string(device)),
      library_(std::move(library)),
      code_(std::move(code)),
      call_(std::move(call)),
      device_(device),
      message_(std::move(message)),
      transient_(transient) {}

std::shared_ptr<Device> open_device(const DeviceSpec& spec) {
  if (spec.kind == DeviceKind::cpu) return std::make_shared<detail::CpuDevice>();
  return detail::open_cuda_device(spec.index);
}

}  // namespace brigade::transport
