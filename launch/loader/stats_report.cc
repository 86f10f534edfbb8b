#include "launch/loader/stats_report.h"

#include <capnp/message.h>
#include <fmt/format.h>

#include <cmath>

#include "launch/loader/stats_report.capnp.h"
#include "transport/remote/remote.h"
#include "transport/wire/wire.h"

namespace brigade::launch {
namespace {

using transport::RemoteError;
using ReportReader = transport::wire::Reader<RemoteError>;

constexpr std::size_t kMaxReportText = 256;
constexpr unsigned kMaxStages = 64;
constexpr unsigned kMaxWorkers = 4096;

std::string report_text(capnp::Text::Reader t, const char* what) {
  if (t.size() > kMaxReportText)
    throw RemoteError(fmt::format("malformed message: {} too long", what));
  return t;
}

double report_time(double v, const char* what) {
  if (!(std::isfinite(v) && v >= 0))
    throw RemoteError(fmt::format("malformed message: {} is {}", what, v));
  return v;
}

void write_stage(const actors::StageStats& s, wire::StageFigures::Builder out) {
  out.setName(s.name);
  out.setKind(s.kind);
  out.setConcurrency(s.concurrency);
  out.setCapacity(s.capacity);
  out.setTasks(s.tasks);
  out.setFailures(s.failures);
  out.setFiltered(s.filtered);
  out.setRetries(s.retries);
  out.setOutputs(s.outputs);
  out.setMeanMs(s.mean_ms);
  out.setP50Ms(s.p50_ms);
  out.setP90Ms(s.p90_ms);
  out.setP99Ms(s.p99_ms);
  out.setStarvedS(s.starved_s);
  out.setBackpressuredS(s.backpressured_s);
  out.setOccupancy(s.occupancy);
  out.setItemsPerS(s.items_per_s);
  out.setElapsedS(s.elapsed_s);
}

actors::StageStats read_stage(wire::StageFigures::Reader s) {
  return {.name = report_text(s.getName(), "stage name"),
          .kind = report_text(s.getKind(), "stage kind"),
          .concurrency = s.getConcurrency(),
          .capacity = s.getCapacity(),
          .tasks = s.getTasks(),
          .failures = s.getFailures(),
          .filtered = s.getFiltered(),
          .retries = s.getRetries(),
          .outputs = s.getOutputs(),
          .mean_ms = report_time(s.getMeanMs(), "mean_ms"),
          .p50_ms = report_time(s.getP50Ms(), "p50_ms"),
          .p90_ms = report_time(s.getP90Ms(), "p90_ms"),
          .p99_ms = report_time(s.getP99Ms(), "p99_ms"),
          .starved_s = report_time(s.getStarvedS(), "starved_s"),
          .backpressured_s = report_time(s.getBackpressuredS(), "backpressured_s"),
          .occupancy = report_time(s.getOccupancy(), "occupancy"),
          .items_per_s = report_time(s.getItemsPerS(), "items_per_s"),
          .elapsed_s = report_time(s.getElapsedS(), "elapsed_s")};
}

template <class List>
std::vector<actors::StageStats> read_stages(List list) {
  if (list.size() > kMaxStages)
    throw RemoteError(fmt::format("a report of {} stages (at most {})", list.size(), kMaxStages));
  std::vector<actors::StageStats> out;
  out.reserve(list.size());
  for (auto s : list) out.push_back(read_stage(s));
  return out;
}

}  // namespace

std::vector<char> write_stats_report(const RankReport& r) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<wire::StatsReport>();
  out.setRank(r.rank);
  out.setHost(r.host);
  out.setSequence(r.sequence);
  out.setIntervalS(r.interval_s);
  out.setAtS(r.at_s);
  out.setSamples(r.samples);
  out.setSamplesTotal(r.samples_total);
  out.setBatches(r.batches);
  out.setExposedWaitS(r.exposed_wait_s);
  out.setExposedWaitTotalS(r.exposed_wait_total_s);
  out.setReadiness(r.readiness);
  out.setSinceLastRequestS(r.since_last_request_s);
  out.setPipelineFull(r.pipeline_full);
  out.setLastSampleId(r.last_sample_id);
  auto stages = out.initStages(static_cast<unsigned>(r.stages.size()));
  for (unsigned i = 0; i < stages.size(); ++i) write_stage(r.stages[i], stages[i]);
  auto totals = out.initStageTotals(static_cast<unsigned>(r.stage_totals.size()));
  for (unsigned i = 0; i < totals.size(); ++i) write_stage(r.stage_totals[i], totals[i]);
  auto workers = out.initWorkers(static_cast<unsigned>(r.workers.size()));
  for (unsigned i = 0; i < workers.size(); ++i) {
    workers[i].setName(r.workers[i].name);
    workers[i].setSamples(r.workers[i].samples);
    workers[i].setBusyS(r.workers[i].busy_s);
    workers[i].setWaitedS(r.workers[i].waited_s);
  }
  return transport::wire::to_bytes(message);
}

RankReport read_stats_report(std::span<const char> bytes) {
  ReportReader reader(bytes);
  const auto r = reader.root<wire::StatsReport>();
  return transport::wire::checked_read<RemoteError>([&] {
    RankReport out{
        .rank = r.getRank(),
        .host = report_text(r.getHost(), "host"),
        .sequence = r.getSequence(),
        .interval_s = report_time(r.getIntervalS(), "interval_s"),
        .at_s = report_time(r.getAtS(), "at_s"),
        .samples = r.getSamples(),
        .samples_total = r.getSamplesTotal(),
        .batches = r.getBatches(),
        .exposed_wait_s = report_time(r.getExposedWaitS(), "exposed_wait_s"),
        .exposed_wait_total_s = report_time(r.getExposedWaitTotalS(), "exposed_wait_total_s"),
        .readiness = report_time(r.getReadiness(), "readiness"),
        .since_last_request_s = report_time(r.getSinceLastRequestS(), "since_last_request_s"),
        .pipeline_full = r.getPipelineFull(),
        .last_sample_id = r.getLastSampleId(),
        .stages = read_stages(r.getStages()),
        .stage_totals = read_stages(r.getStageTotals()),
        .workers = {}};
    const auto workers = r.getWorkers();
    if (workers.size() > kMaxWorkers) {
      throw RemoteError(
          fmt::format("a report of {} workers (at most {})", workers.size(), kMaxWorkers));
    }
    for (auto w : workers) {
      out.workers.push_back({.name = report_text(w.getName(), "worker name"),
                             .samples = w.getSamples(),
                             .busy_s = report_time(w.getBusyS(), "busy_s"),
                             .waited_s = report_time(w.getWaitedS(), "waited_s")});
    }
    return out;
  });
}

}  // namespace brigade::launch
