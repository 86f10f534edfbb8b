#include "launch/stats_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "launch/loader/job_config.h"

namespace brigade::launch {
namespace {

using json = nlohmann::ordered_json;  // keys in the documented order

json figures_of(const actors::StageStats& s) {
  json o = json::object();
  actors::for_each_figure(s, actors::stage_figures(),
                          [&](std::string_view key, const auto& v) { o[std::string(key)] = v; });
  return o;
}

json event_json(const ClusterEvent& e) {
  return {{"kind", std::string(to_string(e.kind))},
          {"rank", e.rank ? json(*e.rank) : json(nullptr)},
          {"host", e.host},
          {"stage", e.stage},
          {"worker", e.worker},
          {"score", e.score},
          {"wait_share", e.wait_share},
          {"last_sample_id", e.last_sample_id},
          {"message", e.message}};
}

double share(double part, double whole) { return whole > 0 ? part / whole : 0; }

// Prometheus label values: backslash, quote and newline escaped.
std::string esc(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

std::string html(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// -- the HTML page ------------------------------------------------------------------

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (at_s, value)
};

struct Mark {
  double at_s;
  std::string label, message;
};

constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string chart(std::string_view title, std::string_view unit, const std::vector<Series>& series,
                  const std::vector<Mark>& marks, std::optional<double> y_max) {
  constexpr double W = 760, H = 240, L = 70, R = 170, T = 30, B = 30;
  double t0 = 0, t1 = 1, y1 = y_max.value_or(0);
  bool first = true;
  for (const auto& s : series) {
    for (auto [t, v] : s.points) {
      t0 = first ? t : std::min(t0, t);
      t1 = first ? t : std::max(t1, t);
      first = false;
      if (!y_max) y1 = std::max(y1, v);
    }
  }
  for (const auto& m : marks) t1 = std::max(t1, m.at_s);
  if (t1 <= t0) t1 = t0 + 1;
  if (y1 <= 0) y1 = 1;
  const auto x = [&](double t) { return L + (t - t0) / (t1 - t0) * (W - L - R); };
  const auto y = [&](double v) { return T + (1 - v / y1) * (H - T - B); };
  std::string out = fmt::format(
      "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\"><title>{}</title>"
      "<text x=\"{}\" y=\"18\" class=\"title\">{}</text>"
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"axis\"/>"
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"axis\"/>"
      "<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{:.3g}</text>"
      "<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">0</text>"
      "<text x=\"{}\" y=\"{}\" class=\"tick\">{:.1f} s</text>"
      "<text x=\"{}\" y=\"{}\" class=\"tick\" text-anchor=\"end\">{:.1f} s</text>"
      "<text x=\"8\" y=\"{}\" class=\"tick\">{}</text>",
      W, H, W, H, html(title), L, html(title), L, T, L, H - B, L, H - B, W - R, H - B, L - 4, T + 4,
      y1, L - 4, H - B, L, H - B + 16, t0, W - R, H - B + 16, t1, T - 14, html(unit));
  for (std::size_t i = 0; i < series.size(); ++i) {
    const char* colour = kColours[i % std::size(kColours)];
    std::string points;
    for (auto [t, v] : series[i].points) points += fmt::format("{:.1f},{:.1f} ", x(t), y(v));
    out += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" points=\"{}\"/>"
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\" class=\"legend\">{}</text>",
        colour, points, W - R + 12, T + 16 * double(i), colour, W - R + 26, T + 9 + 16 * double(i),
        html(series[i].name));
  }
  for (std::size_t i = 0; i < marks.size(); ++i) {
    const double mx = x(marks[i].at_s);
    out += fmt::format(
        "<g class=\"event\"><title>{}</title><line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" "
        "y2=\"{}\"/><text x=\"{:.1f}\" y=\"{}\">{}</text></g>",
        html(marks[i].message), mx, T, mx, H - B, mx + 3, T + 12 + 12 * double(i % 3),
        html(marks[i].label));
  }
  return out + "</svg></figure>\n";
}

}  // namespace

std::string stats_json_line(const RankReport& r, const ClusterFigures* cluster,
                            std::span<const ClusterEvent> events) {
  json stages = json::array();
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    json s{{"name", r.stages[i].name}, {"interval", figures_of(r.stages[i])}};
    s["total"] = i < r.stage_totals.size() ? figures_of(r.stage_totals[i]) : json(nullptr);
    stages.push_back(std::move(s));
  }
  json workers = json::array();
  for (const auto& w : r.workers) {
    workers.push_back({{"name", w.name},
                       {"tasks", w.tasks},
                       {"samples", w.samples},
                       {"busy_s", w.busy_s},
                       {"waited_s", w.waited_s}});
  }
  json o = json::object();
  o["rank"] = r.rank;
  o["host"] = r.host;
  o["sequence"] = r.sequence;
  o["at_s"] = r.at_s;
  o["interval_s"] = r.interval_s;
  o["interval_index"] = r.interval_index;
  o["samples"] = r.samples;
  o["samples_per_s"] = share(double(r.samples), r.interval_s);
  o["batches"] = r.batches;
  o["exposed_wait_s"] = r.exposed_wait_s;
  o["exposed_wait_share"] = share(r.exposed_wait_s, r.interval_s);
  o["readiness"] = r.readiness;
  o["since_last_request_s"] = r.since_last_request_s;
  o["pipeline_full"] = r.pipeline_full;
  o["last_sample_id"] = r.last_sample_id;
  o["totals"] = {{"samples", r.samples_total}, {"exposed_wait_s", r.exposed_wait_total_s}};
  o["stages"] = std::move(stages);
  o["workers"] = std::move(workers);
  if (cluster) {
    json ranks = json::array();
    for (const auto& f : cluster->ranks) {
      ranks.push_back({{"rank", f.rank},
                       {"host", f.host},
                       {"reported", f.reported},
                       {"samples_per_s", f.samples_per_s},
                       {"wait_share", f.wait_share},
                       {"score", f.score}});
    }
    json nodes = json::array();
    for (const auto& w : cluster->workers) {
      json trainers = json::array();
      for (const auto& t : w.trainers) {
        trainers.push_back({{"name", t.name},
                            {"rank", t.rank ? json(*t.rank) : json(nullptr)},
                            {"tasks", t.tasks},
                            {"busy_s", t.busy_s}});
      }
      nodes.push_back({{"worker", w.name},
                       {"host", w.host},
                       {"threads", w.threads},
                       {"tasks_per_s", w.tasks_per_s},
                       {"task_p50_ms", w.task_p50_ms},
                       {"task_p99_ms", w.task_p99_ms},
                       {"queued", w.queued},
                       {"running", w.running},
                       {"busy_share", w.busy_share},
                       {"cpu_share", w.cpu_share},
                       {"trainers", std::move(trainers)}});
    }
    json list = json::array();
    for (const auto& e : events) list.push_back(event_json(e));
    json silent = json::array();
    for (const auto& [name, host] : cluster->silent_workers)
      silent.push_back({{"worker", name}, {"host", host}});
    o["cluster"] = {{"interval", cluster->interval},
                    {"recommended_workers", cluster->recommended_workers},
                    {"refused_reports", cluster->refused_reports},
                    {"ranks", std::move(ranks)},
                    {"workers", std::move(nodes)},
                    {"silent_workers", silent},
                    {"events", std::move(list)}};
  }
  return o.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string prometheus_text(const RankReport& r) {
  const std::string who = fmt::format("rank=\"{}\",host=\"{}\"", r.rank, esc(r.host));
  std::string out;
  const auto one = [&](const char* name, const char* type, const char* help, double value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{{{}}} {}\n", name, help, name, type, name,
                       who, value);
  };
  one("brigade_samples_total", "counter", "Samples delivered to the consumer",
      double(r.samples_total));
  one("brigade_samples_per_second", "gauge", "Samples delivered per second in the last interval",
      share(double(r.samples), r.interval_s));
  one("brigade_exposed_wait_seconds_total", "counter",
      "Time the consumer spent blocked waiting for its next batch", r.exposed_wait_total_s);
  one("brigade_exposed_wait_ratio", "gauge",
      "Share of the last interval the consumer spent blocked waiting for its next batch",
      share(r.exposed_wait_s, r.interval_s));
  one("brigade_data_readiness_ratio", "gauge",
      "Requests for a batch that found one waiting, last interval", r.readiness);
  one("brigade_pipeline_full", "gauge", "1 if the sink held batches nobody asked for",
      r.pipeline_full ? 1 : 0);
  const auto per_stage = [&](const char* name, const char* type, const char* help, auto value,
                             const std::vector<actors::StageStats>& stages) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const auto& s : stages)
      out += fmt::format("{}{{{},stage=\"{}\"}} {}\n", name, who, esc(s.name), value(s));
  };
  per_stage(
      "brigade_stage_tasks_total", "counter", "Tasks finished by the stage this epoch",
      [](const auto& s) { return s.tasks; }, r.stage_totals);
  per_stage(
      "brigade_stage_failures_total", "counter", "Tasks failed by the stage this epoch",
      [](const auto& s) { return s.failures; }, r.stage_totals);
  per_stage(
      "brigade_stage_task_ms", "gauge", "Mean task time of the stage, last interval",
      [](const auto& s) { return s.mean_ms; }, r.stages);
  per_stage(
      "brigade_stage_occupancy_ratio", "gauge",
      "Time-averaged share of the stage's capacity in use, last interval",
      [](const auto& s) { return s.occupancy; }, r.stages);
  per_stage(
      "brigade_stage_starved_seconds", "gauge",
      "Time with an idle worker and no input queued, last interval",
      [](const auto& s) { return s.starved_s; }, r.stages);
  per_stage(
      "brigade_stage_backpressured_seconds", "gauge",
      "Time with finished items waiting for downstream credit, last interval",
      [](const auto& s) { return s.backpressured_s; }, r.stages);
  if (!r.workers.empty()) {
    const auto per_worker = [&](const char* name, const char* help, auto value) {
      out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
      for (const auto& w : r.workers)
        out += fmt::format("{}{{{},worker=\"{}\"}} {}\n", name, who, esc(w.name), value(w));
    };
    per_worker("brigade_worker_samples", "Samples the worker decoded for this rank, last interval",
               [](const WorkerReport& w) { return w.samples; });
    per_worker("brigade_worker_busy_seconds",
               "The worker's time on this rank's tasks, last interval",
               [](const WorkerReport& w) { return w.busy_s; });
    per_worker("brigade_worker_tasks", "Results this rank accepted from the worker, last interval",
               [](const WorkerReport& w) { return w.tasks; });
    per_worker("brigade_worker_waited_seconds",
               "Summed latency of this rank's tasks on the worker, last interval",
               [](const WorkerReport& w) { return w.waited_s; });
  }
  return out;
}

std::string event_log_line(const ClusterEvent& e) {
  const auto or_dash = [](const std::string& v) { return v.empty() ? std::string("-") : v; };
  return fmt::format(
      "statistics: {} rank={} host={} stage={} worker={} score={:.2f} wait_share={:.2f} "
      "last_sample={}: {}",
      to_string(e.kind), e.rank ? std::to_string(*e.rank) : "-", or_dash(e.host), or_dash(e.stage),
      or_dash(e.worker), e.score, e.wait_share, e.last_sample_id, e.message);
}

std::string render_stats_html(std::string_view text, std::string_view title) {
  std::map<std::pair<std::uint32_t, std::string>, Series> rate, wait;
  std::map<std::tuple<std::uint32_t, std::string, std::string>, Series> occupancy;
  std::vector<Mark> marks;
  std::vector<std::string> messages;
  std::set<std::string> seen;
  std::size_t line_no = 0, objects = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    try {
      const json o = json::parse(line);
      const auto rank = o.at("rank").get<std::uint32_t>();
      const auto host = o.at("host").get<std::string>();
      const double at = o.at("at_s").get<double>();
      const std::string who = fmt::format("rank {} ({})", rank, host);
      auto& r = rate[{rank, host}];
      r.name = who;
      r.points.emplace_back(at, o.at("samples_per_s").get<double>());
      auto& w = wait[{rank, host}];
      w.name = who;
      w.points.emplace_back(at, o.at("exposed_wait_share").get<double>());
      for (const auto& s : o.at("stages")) {
        const auto name = s.at("name").get<std::string>();
        auto& series = occupancy[{rank, host, name}];
        series.name = fmt::format("rank {} {}", rank, name);
        series.points.emplace_back(at, s.at("interval").at("occupancy").get<double>());
      }
      if (o.contains("cluster")) {
        for (const auto& e : o.at("cluster").at("events")) {
          const auto message = e.at("message").get<std::string>();
          if (!seen.insert(fmt::format("{} {}", at, message)).second) continue;
          const auto kind = e.at("kind").get<std::string>();
          const auto& er = e.at("rank");
          std::string label = kind;
          if (!er.is_null()) label += fmt::format(": rank {}", er.get<std::uint32_t>());
          const auto stage = e.at("stage").get<std::string>();
          if (!stage.empty()) label += fmt::format(" ({})", stage);
          marks.push_back({at, label, message});
          messages.push_back(fmt::format("{:.1f} s — {}", at, message));
        }
      }
      ++objects;
    } catch (const json::exception& e) {
      throw ConfigError(fmt::format("line {}: not a statistics object: {}", line_no, e.what()));
    }
  }
  const auto values = [](auto& map) {
    std::vector<Series> out;
    for (auto& [key, s] : map) {
      std::sort(s.points.begin(), s.points.end());
      out.push_back(std::move(s));
    }
    return out;
  };
  std::string page = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>{0}</title><style>"
      "body{{font-family:sans-serif;margin:1.5em;color:#222}}"
      "figure{{margin:0 0 1em 0}}svg{{background:#fff;border:1px solid #ddd}}"
      ".title{{font-size:14px;font-weight:bold}}.tick,.legend{{font-size:11px}}"
      ".axis{{stroke:#888}}.event line{{stroke:#c00;stroke-dasharray:4 3}}"
      ".event text{{fill:#c00;font-size:11px}}li{{margin:.2em 0}}"
      "</style></head><body>\n<h1>{0}</h1>\n<p>{1} reports from {2} ranks; {3} event(s).</p>\n",
      html(title), objects, rate.size(), marks.size());
  page += chart("Samples per second, per rank", "samples/s", values(rate), marks, std::nullopt);
  page += chart("Exposed data wait (share of each interval the consumer waited)", "share",
                values(wait), marks, 1.0);
  page +=
      chart("Stage occupancy (share of capacity in use)", "share", values(occupancy), marks, 1.0);
  page += "<h2>Events</h2>\n<ul id=\"events\">\n";
  if (messages.empty()) page += "<li>none</li>\n";
  for (const auto& m : messages) page += fmt::format("<li>{}</li>\n", html(m));
  return page + "</ul>\n</body></html>\n";
}

}  // namespace brigade::launch
