#include "transport/remote/detail/remote_dispatch.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace brigade::transport::detail {
namespace {

long long ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

DispatchTable::DispatchTable(PoolOptions options, DispatchNetwork& network)
    : options_(std::move(options)),
      clock_(clock_or_steady(options_.clock)),
      network_(network),
      no_worker_since_(clock_->now()) {
  for (const auto& w : options_.workers) add_link(w);
}

void DispatchTable::finish(const std::shared_ptr<Call>& call, CallStatus status, std::string reason,
                           SharedBytes bytes) {
  call->finished = true;
  call->result.status = status;
  call->result.reason = std::move(reason);
  call->result.bytes = std::move(bytes);
  call->done.notify_one();
}

Link* DispatchTable::session_in(SessionRef s, Link::Phase phase) {
  if (s.link >= links_.size()) return nullptr;
  auto& l = links_[s.link];
  return l.phase == phase && l.session == s.number ? &l : nullptr;
}

std::optional<SessionRef> DispatchTable::live_session(std::size_t link) const {
  if (link >= links_.size() || links_[link].phase != Link::Phase::live) return std::nullopt;
  return SessionRef{link, links_[link].session};
}

// -- the callers' side ----------------------------------------------------------------

bool DispatchTable::submit(const std::shared_ptr<Call>& call) {
  if (stopping_ || !dead_.empty() || live_ == 0) {
    if (stopping_) {
      finish(call, CallStatus::stopped, "the pool stopped");
    } else {
      finish(call, CallStatus::no_workers, dead_.empty() ? "no worker is live" : dead_);
    }
    return false;
  }
  call->id = next_id_++;
  ++stats_.calls;
  pending_.push_back(call);
  changed.notify_all();
  return true;
}

void DispatchTable::dispatch() {
  while (!pending_.empty()) {
    auto& call = pending_.front();
    std::optional<std::size_t> best;
    std::int64_t best_free = 0;
    for (std::size_t i = 0; i < links_.size(); ++i) {
      const auto& l = links_[i];
      if (l.phase != Link::Phase::live || l.suspect) continue;
      std::int64_t free = std::int64_t(usable_window(l)) - std::int64_t(l.outstanding.size());
      if (free <= 0) continue;
      if (!call->avoid.empty() && l.name == call->avoid && live_ > 1) free -= 1'000'000;
      if (!best || free > best_free) {
        best = i;
        best_free = free;
      }
    }
    if (!best) return;  // every worker's window is full: the call waits its turn
    auto& l = links_[*best];
    call->link = *best;
    call->sent = clock_->now();
    call->result.worker = l.name;
    l.outstanding.insert(call->id);
    outstanding_.emplace(call->id, call);
    network_.send_task({*best, l.session}, call->id, call->op, std::move(call->task));
    pending_.pop_front();
    changed.notify_all();
  }
}

void DispatchTable::abandon(const std::shared_ptr<Call>& call) {
  std::erase(pending_, call);
  if (!outstanding_.erase(call->id)) return;
  auto& l = links_[call->link];
  l.outstanding.erase(call->id);
  if (l.phase == Link::Phase::live) network_.send_cancel({call->link, l.session}, call->id);
  changed.notify_all();
}

void DispatchTable::shut_down() {
  stopping_ = true;
  for (auto& c : pending_) finish(c, CallStatus::stopped, "the pool stopped");
  for (auto& [id, c] : outstanding_) finish(c, CallStatus::stopped, "the pool stopped");
  pending_.clear();
  outstanding_.clear();
}

void DispatchTable::dispatcher_died(const std::string& why) {
  if (stopping_) return;
  dead_ = why;
  spdlog::error("brigade: {}", dead_);
  for (auto& c : pending_) finish(c, CallStatus::no_workers, dead_);
  for (auto& [id, c] : outstanding_) finish(c, CallStatus::no_workers, dead_);
  pending_.clear();
  outstanding_.clear();
  if (live_ > 0) no_worker_since_ = clock_->now();
  live_ = 0;
  changed.notify_all();
}

void DispatchTable::fail_pending(CallStatus status, const std::string& why) {
  for (auto& c : pending_) finish(c, status, why);
  pending_.clear();
}

// -- loss, suspicion, parole ----------------------------------------------------------

void DispatchTable::lose(std::size_t index, const std::string& reason) {
  auto& l = links_[index];
  const auto now = clock_->now();
  if (l.phase == Link::Phase::live) {
    if (!l.suspect) --live_;
    spdlog::warn("brigade: lost worker {}: {} ({} tasks outstanding, sent again)", l.name, reason,
                 l.outstanding.size());
    l.last_error = reason;
    if (live_ == 0) no_worker_since_ = now;
  }
  if (l.phase == Link::Phase::live || l.phase == Link::Phase::hello)
    network_.close({index, l.session});
  l.phase = Link::Phase::idle;
  l.suspect = false;
  l.probing = false;
  l.stuck.clear();
  l.next_attempt = now + options_.reconnect_interval;
  for (auto id : l.outstanding) {
    auto it = outstanding_.find(id);
    if (it == outstanding_.end()) continue;
    ++l.figures.lost;
    ++stats_.lost;
    it->second->result.started = it->second->started;
    finish(it->second, CallStatus::lost, fmt::format("worker {}: {}", l.name, reason));
    it->second->result.worker = l.name;
    outstanding_.erase(it);
  }
  l.outstanding.clear();
  if (live_ == 0) fail_pending(CallStatus::no_workers, "no worker is live");
  changed.notify_all();
}

// The window less the stuck threads' shares: window × free threads / threads (at
// least 1 while a thread is free, 0 when none is).
std::uint32_t DispatchTable::usable_window(const Link& l) {
  const auto stuck = static_cast<std::uint32_t>(l.stuck.size());
  if (stuck == 0) return l.window;
  if (stuck >= l.threads) return 0;
  return std::max<std::uint32_t>(1, l.window * (l.threads - stuck) / l.threads);
}

void DispatchTable::readmit(Link& l, const char* why) {
  if (!l.suspect) return;
  if (usable_window(l) == 0) return;  // every thread still stuck
  l.suspect = false;
  l.probing = false;
  ++live_;
  no_worker_since_.reset();
  spdlog::info("brigade: worker {} is back in the rotation ({})", l.name, why);
  changed.notify_all();
  dispatch();
}

// A task of `l` passed its deadline: started, its thread is stuck and takes its share
// of the window — out of the rotation once every thread is, until one is free; never
// started (every thread of the worker busy or stuck), out for one task_timeout, then
// back once it answers a health probe (parole).
void DispatchTable::suspend(Link& l, bool started, TimePoint now) {
  l.parole = now + options_.task_timeout;
  l.probing = false;
  if (started && usable_window(l) > 0) {
    spdlog::warn(
        "brigade: worker {}: a task passed its deadline of {} ms while running; its "
        "thread is stuck, its window is {} of {} until it is free",
        l.name, ms(options_.task_timeout), usable_window(l), l.window);
    return;
  }
  if (l.suspect) return;
  l.suspect = true;
  --live_;
  spdlog::warn(
      "brigade: worker {} is suspect: a task passed its deadline of {} ms {}; no new task "
      "until {}",
      l.name, ms(options_.task_timeout), started ? "while running" : "before it started",
      started ? "a thread of it is free"
              : "a task of it starts, or it answers a probe after a deadline's time");
  if (live_ == 0) {
    no_worker_since_ = now;
    fail_pending(CallStatus::no_workers, "no worker is live");
  }
  changed.notify_all();
}

// Deadlines: a task past task_timeout is lost on its worker (which is told to cancel).
void DispatchTable::expire(TimePoint now) {
  std::vector<std::uint64_t> expired;
  for (auto& [id, call] : outstanding_)
    if (now - call->sent > options_.task_timeout) expired.push_back(id);
  for (auto id : expired) {
    auto call = outstanding_[id];
    outstanding_.erase(id);
    auto& l = links_[call->link];
    l.outstanding.erase(id);
    ++l.figures.lost;
    ++stats_.lost;
    call->result.started = call->started;
    if (l.phase == Link::Phase::live) {
      network_.send_cancel({call->link, l.session}, id);
      if (call->started) l.stuck.insert(id);
      suspend(l, call->started, now);
    }
    finish(call, CallStatus::lost,
           fmt::format("worker {}: the task passed its deadline of {} ms", l.name,
                       ms(options_.task_timeout)));
  }
  if (!expired.empty()) dispatch();
}

// -- the network's side ---------------------------------------------------------------

void DispatchTable::tick_link(std::size_t index, TimePoint now) {
  auto& l = links_[index];
  switch (l.phase) {
    case Link::Phase::idle:
      if (l.wanted && now >= l.next_attempt) {
        l.phase = Link::Phase::connecting;
        network_.connect(index, l.at);
      }
      break;
    case Link::Phase::connecting:
      break;  // the connect has its own timeout
    case Link::Phase::hello:
      if (now - l.hello_sent > kHelloTimeout)
        end_hello(l, "no answer to the hello within 5 s", options_.reconnect_interval);
      break;
    case Link::Phase::live:
      if (now - l.last_heard > options_.heartbeat_timeout) {
        lose(index, fmt::format("no heartbeat for {} ms", ms(now - l.last_heard)));
        break;
      }
      if (l.suspect && usable_window(l) > 0 && now >= l.parole && !l.probing) {
        l.probing = true;  // the health probe: the next ping, sent now
        l.last_ping = now - options_.heartbeat_interval;
        l.probe = l.pings + 1;
      }
      if (now - l.last_ping >= options_.heartbeat_interval) {
        l.last_ping = now;
        ++l.pings;
        network_.send_ping({index, l.session});
      }
      break;
  }
}

void DispatchTable::tick() {
  if (stopping_) return;
  const auto now = clock_->now();
  for (std::size_t i = 0; i < links_.size(); ++i) tick_link(i, now);
  expire(now);
  changed.notify_all();
}

std::size_t DispatchTable::add_link(const Endpoint& at) {
  for (std::size_t i = 0; i < links_.size(); ++i) {
    if (links_[i].at == at) {
      links_[i].wanted = true;
      return i;
    }
  }
  Link l;
  l.at = at;
  l.name = at.to_string();
  l.figures.name = l.name;
  links_.push_back(std::move(l));
  return links_.size() - 1;
}

void DispatchTable::set_directory_workers(const std::vector<Endpoint>& endpoints) {
  const auto& given = options_.workers;
  for (auto& l : links_) l.wanted = std::find(given.begin(), given.end(), l.at) != given.end();
  for (const auto& e : endpoints) add_link(e);
  changed.notify_all();
}

std::optional<SessionRef> DispatchTable::connected(std::size_t link) {
  auto& l = links_[link];
  if (l.phase != Link::Phase::connecting) {
    connect_failed(link, {});
    return std::nullopt;
  }
  l.phase = Link::Phase::hello;
  l.hello_sent = clock_->now();
  changed.notify_all();
  return SessionRef{link, ++l.session};
}

void DispatchTable::connect_failed(std::size_t link, const std::string& why) {
  auto& l = links_[link];
  l.phase = Link::Phase::idle;
  l.next_attempt = clock_->now() + options_.reconnect_interval;
  if (!why.empty()) {
    if (why != l.last_error) spdlog::info("brigade: cannot reach worker {}: {}", l.name, why);
    l.last_error = why;
  }
  changed.notify_all();
}

bool DispatchTable::in_hello(SessionRef s) const {
  return s.link < links_.size() && links_[s.link].phase == Link::Phase::hello &&
         links_[s.link].session == s.number;
}

void DispatchTable::welcome(SessionRef s, std::uint32_t window, std::uint32_t threads) {
  auto* l = session_in(s, Link::Phase::hello);
  if (!l) return;
  l->window = std::max<std::uint32_t>(1, window);
  l->threads = std::max<std::uint32_t>(1, threads);
  l->pings = l->pongs = l->probe = 0;
  l->phase = Link::Phase::live;
  l->last_heard = l->last_ping = clock_->now();
  l->ever_live = true;
  ++l->figures.sessions;
  ++live_;
  no_worker_since_.reset();
  spdlog::info("brigade: worker {} is live (window {})", l->name, l->window);
  changed.notify_all();
  dispatch();
}

void DispatchTable::end_hello(Link& l, std::string error, std::chrono::milliseconds backoff) {
  network_.close({static_cast<std::size_t>(&l - links_.data()), l.session});
  l.phase = Link::Phase::idle;
  l.last_error = std::move(error);
  l.next_attempt = clock_->now() + backoff;
  changed.notify_all();
}

void DispatchTable::bad_welcome(SessionRef s, const std::string& why) {
  if (auto* l = session_in(s, Link::Phase::hello)) end_hello(*l, why, options_.reconnect_interval);
}

void DispatchTable::refused(SessionRef s, const std::string& why) {
  auto* l = session_in(s, Link::Phase::hello);
  if (!l) return;
  auto error = "refused: " + why;
  if (l->last_error != error)
    spdlog::error("brigade: worker {} refused this trainer: {}", l->name, why);
  end_hello(*l, std::move(error), 5 * options_.reconnect_interval);
}

void DispatchTable::record_done(Link& l, const Call& call, std::size_t bytes) {
  const double latency =
      std::chrono::duration<double, std::milli>(clock_->now() - call.sent).count();
  if (l.latencies_ms.size() >= kLatencies)
    l.latencies_ms.erase(l.latencies_ms.begin(), l.latencies_ms.begin() + kLatencies / 2);
  l.latencies_ms.push_back(static_cast<float>(latency));
  ++l.figures.tasks;
  l.figures.latency_s += latency / 1000;
  l.figures.bytes += bytes;
  ++stats_.done;
  stats_.bytes += bytes;
}

void DispatchTable::reply(std::optional<SessionRef> s, std::uint64_t id, CallStatus status,
                          std::string reason, SharedBytes bytes) {
  auto* link = s ? session_in(*s, Link::Phase::live) : nullptr;
  if (!link || !link->outstanding.count(id)) {
    ++stats_.late_dropped;  // a lost attempt's late result, or a forgery
    // A task stuck past its deadline that finished after all: its thread is free.
    if (link && link->stuck.erase(id)) {
      readmit(*link, "its stuck task ended");
      dispatch();
    }
    changed.notify_all();
    return;
  }
  link->outstanding.erase(id);
  link->last_heard = clock_->now();
  auto it = outstanding_.find(id);
  auto call = it->second;
  outstanding_.erase(it);
  if (status == CallStatus::done) {
    record_done(*link, *call, bytes.size());
  } else if (status == CallStatus::failed) {
    ++stats_.failed;
  } else {
    ++link->figures.lost;
    ++stats_.lost;
  }
  finish(call, status, std::move(reason), std::move(bytes));
  dispatch();
  changed.notify_all();
}

void DispatchTable::started(SessionRef s, std::uint64_t id) {
  auto* l = session_in(s, Link::Phase::live);
  if (!l || !l->outstanding.count(id)) return;
  l->last_heard = clock_->now();
  if (auto it = outstanding_.find(id); it != outstanding_.end()) it->second->started = true;
  // A thread took a task: it has a free thread.
  readmit(*l, "a task started");
  changed.notify_all();
}

void DispatchTable::freed(SessionRef s, std::uint64_t id) {
  auto* l = session_in(s, Link::Phase::live);
  if (!l || !l->stuck.erase(id)) return;
  readmit(*l, "its stuck task ended");
  dispatch();
}

void DispatchTable::heard(SessionRef s) {
  auto* l = session_in(s, Link::Phase::live);
  if (!l) return;
  l->last_heard = clock_->now();
  if (l->pongs < l->pings) ++l->pongs;
  if (l->suspect && l->probing && l->pongs >= l->probe) readmit(*l, "it answered a probe");
}

bool DispatchTable::lost(SessionRef s, const std::string& reason) {
  if (!session_in(s, Link::Phase::live)) return false;
  lose(s.link, reason);
  return true;
}

std::size_t DispatchTable::outstanding_started() const {
  return static_cast<std::size_t>(std::count_if(outstanding_.begin(), outstanding_.end(),
                                                [](const auto& c) { return c.second->started; }));
}

void DispatchTable::set_directory_unreachable(std::optional<std::string> why) {
  directory_unreachable_ = std::move(why);
  changed.notify_all();
}

// -- reads ----------------------------------------------------------------------------

std::vector<std::string> DispatchTable::lost_workers() const {
  std::vector<std::string> out;
  for (const auto& l : links_) {
    if (l.phase == Link::Phase::live && l.suspect) {
      out.push_back(fmt::format("{} (suspect: a task stuck past its deadline)", l.name));
      continue;
    }
    if (l.phase == Link::Phase::live) continue;
    if (l.ever_live || !l.last_error.empty())
      out.push_back(
          fmt::format("{} ({})", l.name, l.last_error.empty() ? "not reached" : l.last_error));
  }
  return out;
}

PoolStats DispatchTable::stats() const {
  auto s = stats_;
  s.live_workers = live_;
  for (const auto& l : links_) {
    auto f = l.figures;
    f.live = l.phase == Link::Phase::live && !l.suspect;
    auto lat = l.latencies_ms;
    if (!lat.empty()) {
      std::sort(lat.begin(), lat.end());
      f.p50_ms = lat[lat.size() / 2];
      f.p99_ms = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
    }
    s.workers.push_back(std::move(f));
  }
  return s;
}

}  // namespace brigade::transport::detail
