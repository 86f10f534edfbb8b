#include "transport/remote/detail/worker_table.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/remote_protocol.h"

namespace brigade::transport::detail {

WorkerTable::WorkerTable(WorkerOptions options, std::uint32_t window, OperationRegistry operations,
                         WorkerNetwork& network)
    : options_(std::move(options)),
      window_(window),
      operations_(std::move(operations)),
      network_(network),
      clock_(clock_or_steady(options_.clock)) {}

Dropped WorkerTable::drop(Dropped why) {
  ++stats_.messages_dropped;
  changed.notify_all();
  return why;
}

void WorkerTable::dropped() { drop("an unknown message"); }

// -- the gate -------------------------------------------------------------------------

std::string WorkerTable::check_hello(const HelloFields& hello) const {
  const auto& o = options_;
  if (hello.protocol != kProtocolVersion) {
    return fmt::format("protocol version {} (trainer) differs from {} (worker {})", hello.protocol,
                       kProtocolVersion, name_);
  }
  if (!same_secret(hello.token, token_digest(o.security.token)))
    return fmt::format("the job token differs from worker {}'s", name_);
  if (hello.build_id != build_id()) {
    return fmt::format("build '{}' (trainer) differs from '{}' (worker {})", hello.build_id,
                       build_id(), name_);
  }
  for (const auto& op : hello.operations) {
    std::uint32_t have = 0;
    for (const auto& v : operations_.list())
      if (v.name == op.name) have = v.version;
    if (have == 0) {
      return fmt::format("operation '{}' version {} (trainer) is not on worker {}", op.name,
                         op.version, name_);
    }
    if (have != op.version) {
      return fmt::format("operation '{}' version {} (trainer) differs from version {} (worker {})",
                         op.name, op.version, have, name_);
    }
  }
  if (o.fingerprint != 0 && hello.fingerprint != o.fingerprint) {
    return fmt::format("dataset fingerprint {:016x} (trainer) differs from {:016x} (worker {})",
                       hello.fingerprint, o.fingerprint, name_);
  }
  if (hello.trainer_key.size() != 16) return "a trainer key of 16 bytes is required";
  return {};
}

HelloOutcome WorkerTable::hello(std::span<const char> bytes, bool answerable) {
  HelloOutcome out;
  std::string name;
  std::optional<std::uint32_t> rank;
  try {
    const auto h = read_hello(bytes);
    out.refusal = check_hello(h);
    out.trainer_key = h.trainer_key;
    name = h.name;
    rank = h.rank;
  } catch (const RemoteError& e) {
    out.refusal = e.what();
  }
  if (!answerable) out.refusal = "an anonymous hello";
  if (stopping_) out.refusal = fmt::format("worker {} is stopping", name_);
  if (!out.refusal.empty()) {
    ++stats_.hellos_refused;
    changed.notify_all();
    return out;
  }
  auto s = std::make_shared<Session>();
  s->number = next_session_++;
  s->key = random_key();
  s->trainer_key = out.trainer_key;
  s->name = name;
  s->rank = rank;
  s->last_heard = clock_->now();
  sessions_.emplace(s->number, s);
  ++stats_.sessions_opened;
  ++stats_.sessions_open;
  out.session = s->number;
  out.welcome = write_welcome({.protocol = kProtocolVersion,
                               .build_id = std::string(build_id()),
                               .session_key = s->key,
                               .name = name_,
                               .window = window_,
                               .threads = static_cast<std::uint32_t>(options_.threads)});
  spdlog::info("brigade worker: session opened for {}", name);
  changed.notify_all();
  return out;
}

// -- a session's messages -------------------------------------------------------------

WorkerTable::Session* WorkerTable::find(std::uint64_t s, const std::string& key, Dropped& why) {
  auto it = sessions_.find(s);
  if (it == sessions_.end()) {
    why = drop("a message for an ended session");
    return nullptr;
  }
  if (!same_secret(key, it->second->key)) {
    why = drop("a message with a wrong session key");
    return nullptr;
  }
  return it->second.get();
}

Dropped WorkerTable::task(std::uint64_t s, const std::string& key, std::uint64_t id, std::string op,
                          std::vector<char> payload) {
  Dropped why = nullptr;
  auto* session = find(s, key, why);
  if (!session) return why;
  session->last_heard = clock_->now();
  if (session->running.count(id) || std::any_of(session->queue.begin(), session->queue.end(),
                                                [id](const TakenTask& t) { return t.id == id; })) {
    return drop("a task whose id the session holds already");
  }
  if (session->queue.size() + session->running.size() >= window_) {
    network_.send_refuse_task(
        s, id, fmt::format("worker {}: the session's window of {} tasks is full", name_, window_));
    return nullptr;
  }
  session->queue.push_back({s, id, std::move(op), std::move(payload), {}, {}});
  if (!session->in_ring) {
    session->in_ring = true;
    // It joins at the turn now being served: no credit saved up while it had no task.
    session->pass = std::max(session->pass, now_pass_);
    ring_.push_back(sessions_.at(s));
  }
  changed.notify_all();
  work.notify_one();
  return nullptr;
}

Dropped WorkerTable::cancel(std::uint64_t s, const std::string& key, std::uint64_t id) {
  Dropped why = nullptr;
  auto* session = find(s, key, why);
  if (!session) return why;
  auto& q = session->queue;
  if (auto it = std::find_if(q.begin(), q.end(), [id](const TakenTask& t) { return t.id == id; });
      it != q.end()) {
    q.erase(it);
    ++stats_.tasks_cancelled;
    changed.notify_all();
  } else if (auto r = session->running.find(id); r != session->running.end()) {
    r->second.request_stop();
  }
  return nullptr;
}

Dropped WorkerTable::ping(std::uint64_t s, const std::string& key) {
  Dropped why = nullptr;
  auto* session = find(s, key, why);
  if (!session) return why;
  session->last_heard = clock_->now();
  network_.send_pong(s);
  return nullptr;
}

void WorkerTable::end(std::uint64_t s, const std::string& why) {
  auto it = sessions_.find(s);
  if (it == sessions_.end()) return;
  auto& session = *it->second;
  spdlog::info("brigade worker: session of {} ended: {}", session.name, why);
  stats_.tasks_cancelled += session.queue.size();
  session.queue.clear();
  for (auto& [id, stop] : session.running) stop.request_stop();
  --stats_.sessions_open;
  ring_.remove(it->second);
  sessions_.erase(it);  // its running tasks' threads let go of it when they return
  network_.close(s);
  changed.notify_all();
}

void WorkerTable::trainer_gone(std::uint64_t s) { end(s, "the trainer is gone"); }

bool WorkerTable::open(std::uint64_t s) const { return sessions_.count(s) > 0; }

void WorkerTable::tick() {
  const auto now = clock_->now();
  std::vector<std::pair<std::uint64_t, std::chrono::milliseconds>> silent;
  for (const auto& [n, s] : sessions_) {
    const auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(now - s->last_heard);
    if (quiet > options_.heartbeat_timeout) silent.emplace_back(n, quiet);
  }
  for (const auto& [n, quiet] : silent)
    end(n, fmt::format("no heartbeat for {} ms", quiet.count()));
}

// -- the operation threads ------------------------------------------------------------

std::uint32_t WorkerTable::weight_of(const Session& s) const {
  return s.rank && *s.rank < weights_.size() ? weights_[*s.rank] : kNeutralRankWeight;
}

void WorkerTable::set_rank_weights(std::vector<std::uint32_t> weights) {
  for (auto& w : weights) w = std::clamp(w, std::uint32_t{1}, kMaxRankWeight);
  weights_ = std::move(weights);
  ++stats_.weight_updates;
  changed.notify_all();
}

std::optional<TakenTask> WorkerTable::take() {
  while (!stopping_ && !ring_.empty()) {
    // The session with the least pass; among equals the first in the ring (round robin).
    auto pick = ring_.begin();
    for (auto it = ring_.begin(); it != ring_.end(); ++it)
      if ((*it)->pass < (*pick)->pass) pick = it;
    auto s = *pick;
    ring_.erase(pick);
    if (!open(s->number) || s->queue.empty()) {  // ended, or its tasks were cancelled
      s->in_ring = false;
      continue;
    }
    now_pass_ = s->pass;
    s->pass += kStride / weight_of(*s);
    auto task = std::move(s->queue.front());
    s->queue.pop_front();
    if (s->queue.empty()) {
      s->in_ring = false;
    } else {
      ring_.push_back(s);  // its next task waits for the other sessions' turns
    }
    std::stop_source stop;
    task.stop = stop.get_token();
    task.started = clock_->now();
    s->running.emplace(task.id, std::move(stop));
    network_.send_started(s->number, task.id);
    changed.notify_all();
    return task;
  }
  return std::nullopt;
}

void WorkerTable::finish(const TakenTask& task, std::vector<char> result, std::string error) {
  const double seconds = std::chrono::duration<double>(clock_->now() - task.started).count();
  stats_.busy_seconds += seconds;
  auto it = sessions_.find(task.session);
  const bool ended = it == sessions_.end();
  if (!ended && !task.stop.stop_requested()) note_served(it->second->name, seconds, !error.empty());
  if (!ended) it->second->running.erase(task.id);
  changed.notify_all();
  if (ended || task.stop.stop_requested()) {
    ++stats_.tasks_cancelled;
    // The thread is free again (a task stuck past its deadline keeps its worker out of
    // the trainer's rotation until then).
    if (!ended) network_.send_freed(task.session, task.id);
    return;
  }
  if (error.empty()) {
    ++stats_.tasks_done;
    // A line at the 1st, 10th, 100th… result of a session: progress a log (and a
    // process test) can follow, at a bounded rate.
    const auto n = ++it->second->results;
    if (n == 1) spdlog::info("brigade worker: first result sent to {}", it->second->name);
    for (std::uint64_t p = 10; p <= n; p *= 10)
      if (p == n) spdlog::info("brigade worker: {} results sent to {}", n, it->second->name);
    network_.send_result(task.session, task.id, std::move(result));
  } else {
    ++stats_.tasks_failed;
    network_.send_failed(task.session, task.id, error);
  }
}

void WorkerTable::shut_down() {
  stopping_ = true;
  work.notify_all();
}

// -- reads ----------------------------------------------------------------------------

WorkerStats WorkerTable::stats() const {
  auto s = stats_;
  for (const auto& [n, session] : sessions_)
    s.tasks_outstanding += session->queue.size() + session->running.size();
  return s;
}

std::size_t WorkerTable::held(std::uint64_t s) const {
  auto it = sessions_.find(s);
  return it == sessions_.end() ? 0 : it->second->queue.size() + it->second->running.size();
}

const std::string& WorkerTable::session_key(std::uint64_t s) const {
  static const std::string none;
  auto it = sessions_.find(s);
  return it == sessions_.end() ? none : it->second->key;
}

// -- the directory join ---------------------------------------------------------------

DirectoryJoin::DirectoryJoin(Endpoint at, std::shared_ptr<const actors::Clock> clock,
                             JoinNetwork& network)
    : at_(std::move(at)),
      clock_(clock_or_steady(std::move(clock))),
      network_(network),
      next_attempt_(clock_->now()) {}

void DirectoryJoin::retry_later() {
  phase_ = Phase::idle;
  next_attempt_ = next_retry(clock_->now(), ++failures_, kRetry);
}

void DirectoryJoin::tick() {
  const auto now = clock_->now();
  if (phase_ == Phase::idle && now >= next_attempt_) {
    phase_ = Phase::connecting;
    network_.connect();
  } else if (phase_ == Phase::joining && now >= answer_by_) {
    spdlog::error(
        "brigade worker: {} did not answer the join within {} s (is it a worker's port "
        "rather than the directory's?); trying again",
        at_.to_string(), kAnswer.count());
    network_.forget();
    retry_later();
  }
}

void DirectoryJoin::connected() {
  if (phase_ != Phase::connecting) return;
  phase_ = Phase::joining;
  answer_by_ = clock_->now() + kAnswer;
  ++attempts_;
  network_.send_join();
}

void DirectoryJoin::connect_failed(const std::string& why) {
  if (phase_ != Phase::connecting) return;
  if (why != last_error_) {
    spdlog::info("brigade worker: cannot reach the directory at {} (trying again): {}",
                 at_.to_string(), why);
  }
  last_error_ = why;
  retry_later();
}

void DirectoryJoin::joined() {
  if (phase_ != Phase::joining) return;
  phase_ = Phase::joined;
  failures_ = 0;
  last_error_.clear();
  spdlog::info("brigade worker: joined the directory at {}", at_.to_string());
}

void DirectoryJoin::refused(const std::string& why) {
  if (phase_ != Phase::joining && phase_ != Phase::joined) return;
  spdlog::error("brigade worker: the directory at {} refused to list this worker: {}",
                at_.to_string(), why);
  network_.forget();
  phase_ = Phase::refused;
}

void DirectoryJoin::directory_gone() {
  if (phase_ != Phase::joining && phase_ != Phase::joined) return;
  spdlog::warn("brigade worker: the directory is gone; joining again when it is back");
  network_.forget();
  retry_later();
}

// -- statistics (issue 24) --------------------------------------------------------------

void WorkerTable::note_served(const std::string& trainer, double seconds, bool failed) {
  if (failed) {
    ++served_.failed;
    return;
  }
  served_times_.record(static_cast<std::uint64_t>(std::max(0.0, seconds) * 1e9));
  ++served_.tasks;
  served_.busy_s += seconds;
  // One entry per trainer name served in the interval: bounded by the sessions that
  // finished a task in it.
  auto& t = served_trainers_[trainer];
  ++t.tasks;
  t.busy_s += seconds;
}

WorkerServed WorkerTable::take_served() {
  auto out = std::move(served_);
  served_ = {};
  out.p50_ms = served_times_.quantile_ns(0.5) / 1e6;
  out.p99_ms = served_times_.quantile_ns(0.99) / 1e6;
  served_times_ = {};
  for (auto& [name, t] : served_trainers_) {
    t.name = name;
    out.trainers.push_back(std::move(t));
  }
  served_trainers_.clear();
  for (const auto& [n, session] : sessions_) {
    out.queued += session->queue.size();
    out.running += session->running.size();
  }
  out.threads = static_cast<std::uint32_t>(options_.threads);
  return out;
}

}  // namespace brigade::transport::detail
