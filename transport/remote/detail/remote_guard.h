#pragma once

// What keeps a networked actor system's actors from obeying a peer (issue 21).
//
// CAF delivers system messages from any peer of the middleman to any actor whose id the
// peer can guess: an exit_msg with exit_reason::kill ends an actor whatever its exit
// handler says, an `error` sent as an ordinary message ends it through the default
// error handler, and a down_msg runs its down handler. So every actor of the worker's
// and the pool's systems is a Guarded actor: its mailbox admits only
//   - responses (to its own requests; CAF drops those it does not await),
//   - ordinary messages that start with an atom (the protocol's; the behavior and the
//     default handler check keys and count what they drop),
//   - a down_msg whose sender is the actor that went down (what a monitor delivers:
//     a forged one from a peer's own actor says another actor is down),
//   - an exit_msg only once its Guard is stopping (this process's own shutdown);
// everything else is dropped at enqueue, counted in the Guard, and summarized in the
// log at a bounded rate (DropLog: a line per interval, not per message). The down
// handlers in turn act only on actors they monitor.
//
// THREADING. Guard and DropLog are shared by actors and threads; enqueue runs in the
// sender's thread.

#include <spdlog/spdlog.h>

#include <atomic>
#include <caf/all.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "actors/clock.h"

namespace brigade::transport::detail {

/// Counts dropped messages by kind and logs a summary at most once per `interval` of
/// `clock` (the first one at once, then what accumulated, at the next drop after the
/// interval has passed, and at destruction).
class DropLog {
 public:
  DropLog(std::string who, std::chrono::milliseconds interval,
          std::shared_ptr<const actors::Clock> clock = actors::Clock::steady())
      : who_(std::move(who)), interval_(interval), clock_(std::move(clock)) {}
  ~DropLog() { flush(true); }
  DropLog(const DropLog&) = delete;
  DropLog& operator=(const DropLog&) = delete;

  /// Counts one dropped `kind` ("an exit message", "a task with a wrong key"), from `peer`.
  void note(std::string_view kind, std::string_view peer = {}) {
    std::lock_guard lock(mutex_);
    ++total_;
    ++pending_[std::string(kind)];
    if (!peer.empty()) last_peer_ = peer;
    flush_locked(false);
  }
  std::uint64_t total() const {
    std::lock_guard lock(mutex_);
    return total_;
  }
  std::uint64_t lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  void flush(bool force) {
    std::lock_guard lock(mutex_);
    flush_locked(force);
  }

 private:
  void flush_locked(bool force) {
    const auto now = clock_->now();
    if (pending_.empty() || (!force && lines_ > 0 && now - last_line_ < interval_)) return;
    std::string what;
    std::uint64_t n = 0;
    for (const auto& [kind, count] : pending_) {
      if (!what.empty()) what += ", ";
      what += std::to_string(count) + " × " + kind;
      n += count;
    }
    spdlog::warn(
        "{}: dropped {} message(s) from peers{}: {} ({} since the start; at most one "
        "such line per {} s)",
        who_, n, last_peer_.empty() ? "" : " (the last from " + last_peer_ + ")", what, total_,
        interval_.count() / 1000.0);
    pending_.clear();
    last_line_ = now;
    ++lines_;
  }

  const std::string who_;
  const std::chrono::milliseconds interval_;
  const std::shared_ptr<const actors::Clock> clock_;
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t> pending_;
  std::string last_peer_;
  std::uint64_t total_ = 0, lines_ = 0;
  std::chrono::steady_clock::time_point last_line_{};
};

/// Shared by the actors of one networked system.
struct Guard {
  explicit Guard(std::string who,
                 std::shared_ptr<const actors::Clock> clock = actors::Clock::steady(),
                 std::chrono::milliseconds interval = std::chrono::seconds(10))
      : log(std::move(who), interval, std::move(clock)) {}
  std::atomic<bool> stopping{false};  // set before this process sends its own exits
  std::atomic<std::uint64_t> exits{0}, downs{0}, others{0};  // dropped at enqueue
  DropLog log;

  std::uint64_t dropped() const { return exits + downs + others; }
};

/// Whether a guarded actor's mailbox admits `x` (counting what it drops).
inline bool admit(Guard& guard, const caf::mailbox_element& x) {
  if (x.mid.is_response()) return true;
  const auto& c = x.content();
  if (c.size() == 0) {
    ++guard.others;
    guard.log.note("an empty message");
    return false;
  }
  if (c.match_element<caf::atom_value>(0)) return true;
  if (c.size() == 1 && c.match_element<caf::down_msg>(0)) {
    const auto& down = c.get_as<caf::down_msg>(0);
    if (x.sender && x.sender->address() == down.source) return true;
    ++guard.downs;
    guard.log.note("a down message not from the actor it names");
    return false;
  }
  if (c.size() == 1 && c.match_element<caf::exit_msg>(0)) {
    if (guard.stopping.load()) return true;
    ++guard.exits;
    guard.log.note("an exit message");
    return false;
  }
  ++guard.others;
  guard.log.note("a system or unknown message");
  return false;
}

/// A stateful event-based actor whose mailbox admits only what `admit` does. `init`
/// builds its behavior like a function-based actor's body.
template <class State>
class Guarded final : public caf::stateful_actor<State> {
 public:
  using Base = caf::stateful_actor<State>;
  using Init = std::function<caf::behavior(Base*)>;

  Guarded(caf::actor_config& config, std::shared_ptr<Guard> guard, Init init)
      : Base(config), guard_(std::move(guard)), init_(std::move(init)) {}

  void enqueue(caf::mailbox_element_ptr x, caf::execution_unit* host) override {
    if (!x || !admit(*guard_, *x)) return;
    Base::enqueue(std::move(x), host);
  }

  caf::behavior make_behavior() override {
    // An ordinary `error` message cannot get here (admit drops it); a failed request's
    // error goes to its own handler. Never quit on one that slips through.
    this->set_error_handler([g = guard_](caf::scheduled_actor*, caf::error&) {
      ++g->others;
      g->log.note("an error message");
    });
    this->set_exit_handler([g = guard_](caf::scheduled_actor* self, caf::exit_msg& m) {
      if (g->stopping.load()) self->quit(m.reason);
    });
    return init_(this);
  }

 private:
  std::shared_ptr<Guard> guard_;
  Init init_;
};

/// Spawns a Guarded<State> running `init` from `spawner` (an actor system or an actor).
template <class State, class Spawner>
caf::actor spawn_guarded(Spawner& spawner, std::shared_ptr<Guard> guard,
                         typename Guarded<State>::Init init) {
  return spawner.template spawn<Guarded<State>>(std::move(guard), std::move(init));
}

}  // namespace brigade::transport::detail
