#include "launch/loader/stats_report.h"

#include <capnp/message.h>
#include <fmt/format.h>

#include <charconv>
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
  out.setEpochRestarted(r.epoch_restarted);
  out.setIntervalIndex(r.interval_index);
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
    workers[i].setTasks(r.workers[i].tasks);
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
        .epoch_restarted = r.getEpochRestarted(),
        .stages = read_stages(r.getStages()),
        .stage_totals = read_stages(r.getStageTotals()),
        .workers = {},
        .interval_index = r.getIntervalIndex()};
    const auto workers = r.getWorkers();
    if (workers.size() > kMaxWorkers) {
      throw RemoteError(
          fmt::format("a report of {} workers (at most {})", workers.size(), kMaxWorkers));
    }
    for (auto w : workers) {
      out.workers.push_back({.name = report_text(w.getName(), "worker name"),
                             .samples = w.getSamples(),
                             .busy_s = report_time(w.getBusyS(), "busy_s"),
                             .waited_s = report_time(w.getWaitedS(), "waited_s"),
                             .tasks = w.getTasks()});
    }
    return out;
  });
}

std::optional<std::uint32_t> rank_of_trainer(std::string_view name) {
  constexpr std::string_view prefix = "rank ";
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  std::uint32_t rank = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), rank);
  if (ec != std::errc() || end == name.data() ||
      !std::string_view(end, name.data() + name.size() - end).starts_with(" of "))
    return std::nullopt;
  return rank;
}

std::vector<char> write_worker_report(const WorkerNodeReport& r) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<wire::WorkerNodeStats>();
  out.setName(r.name);
  out.setHost(r.host);
  out.setIncarnation(r.incarnation);
  out.setSequence(r.sequence);
  out.setIntervalS(r.interval_s);
  out.setAtS(r.at_s);
  out.setThreads(r.threads);
  out.setTasks(r.tasks);
  out.setFailed(r.failed);
  out.setBusyS(r.busy_s);
  out.setTaskP50Ms(r.task_p50_ms);
  out.setTaskP99Ms(r.task_p99_ms);
  out.setQueued(r.queued);
  out.setRunning(r.running);
  out.setCpuS(r.cpu_s);
  out.setIntervalIndex(r.interval_index);
  auto trainers = out.initTrainers(static_cast<unsigned>(r.trainers.size()));
  for (unsigned i = 0; i < trainers.size(); ++i) {
    trainers[i].setName(r.trainers[i].name);
    trainers[i].setTasks(r.trainers[i].tasks);
    trainers[i].setBusyS(r.trainers[i].busy_s);
  }
  return transport::wire::to_bytes(message);
}

WorkerNodeReport read_worker_report(std::span<const char> bytes) {
  ReportReader reader(bytes);
  const auto r = reader.root<wire::WorkerNodeStats>();
  return transport::wire::checked_read<RemoteError>([&] {
    WorkerNodeReport out{.name = report_text(r.getName(), "worker name"),
                         .host = report_text(r.getHost(), "host"),
                         .incarnation = r.getIncarnation(),
                         .sequence = r.getSequence(),
                         .interval_s = report_time(r.getIntervalS(), "interval_s"),
                         .at_s = report_time(r.getAtS(), "at_s"),
                         .threads = r.getThreads(),
                         .tasks = r.getTasks(),
                         .failed = r.getFailed(),
                         .busy_s = report_time(r.getBusyS(), "busy_s"),
                         .task_p50_ms = report_time(r.getTaskP50Ms(), "task_p50_ms"),
                         .task_p99_ms = report_time(r.getTaskP99Ms(), "task_p99_ms"),
                         .queued = r.getQueued(),
                         .running = r.getRunning(),
                         .cpu_s = report_time(r.getCpuS(), "cpu_s"),
                         .trainers = {},
                         .interval_index = r.getIntervalIndex()};
    const auto trainers = r.getTrainers();
    if (trainers.size() > kMaxWorkers) {
      throw RemoteError(
          fmt::format("a report of {} trainers (at most {})", trainers.size(), kMaxWorkers));
    }
    for (auto t : trainers) {
      auto name = report_text(t.getName(), "trainer name");
      const auto rank = rank_of_trainer(name);
      out.trainers.push_back({.name = std::move(name),
                              .rank = rank,
                              .tasks = t.getTasks(),
                              .busy_s = report_time(t.getBusyS(), "busy_s")});
    }
    return out;
  });
}

}  // namespace brigade::launch
