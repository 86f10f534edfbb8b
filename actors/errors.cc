#include "actors/errors.h"

namespace brigade::actors {
namespace {

std::string with_causes(const std::string& reason, const std::vector<SampleFailure>& recent) {
  std::string text = reason;
  if (!recent.empty()) text += "; recent causes:";
  for (const auto& r : recent) {
    text += "\n  stage '" + r.stage + "', source position";
    text += r.positions.size() == 1 ? " " : "s ";
    for (std::size_t i = 0; i < r.positions.size(); ++i) {
      text += (i ? "," : "") + std::to_string(r.positions[i]);
    }
    text += ": " + r.message();
  }
  return text;
}

}  // namespace

std::string SampleFailure::message() const {
  if (!id) return cause;
  return "sample " + std::to_string(*id) + " (" + path + "): " + cause;
}

bool is_transient(const std::error_code& code) {
  if (!code) return false;
  for (auto e : {std::errc::resource_unavailable_try_again, std::errc::timed_out,
                 std::errc::connection_reset, std::errc::connection_aborted,
                 std::errc::connection_refused, std::errc::host_unreachable,
                 std::errc::network_unreachable, std::errc::network_down, std::errc::interrupted}) {
    if (code == e) return true;
  }
  return false;
}

PipelineFailure::PipelineFailure(const std::string& reason, std::vector<SampleFailure> recent)
    : std::runtime_error(with_causes(reason, recent)), recent_(std::move(recent)) {}

}  // namespace brigade::actors
