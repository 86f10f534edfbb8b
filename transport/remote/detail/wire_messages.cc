#include "transport/remote/detail/wire_messages.h"

#include <capnp/message.h>
#include <fmt/format.h>

#include "transport/remote/detail/wire.h"
#include "transport/remote/remote.capnp.h"

namespace brigade::transport::detail {
namespace {

constexpr std::size_t kMaxText = 4096;  // names, paths, keys, messages

std::string text(capnp::Text::Reader t, const char* what) {
  if (t.size() > kMaxText) throw RemoteError(fmt::format("malformed message: {} too long", what));
  return t;
}

std::string data(capnp::Data::Reader d, const char* what) {
  if (d.size() > kMaxText) throw RemoteError(fmt::format("malformed message: {} too long", what));
  return to_string(d);
}

template <class T, class F>
auto read(std::span<const char> bytes, F&& fn) {
  WireReader reader(bytes);
  auto root = reader.root<T>();
  return checked_read([&] { return fn(root); });
}

}  // namespace

std::vector<char> write_hello(const HelloFields& h) {
  capnp::MallocMessageBuilder message;
  auto hello = message.initRoot<wire::Hello>();
  hello.setProtocol(h.protocol);
  hello.setBuildId(h.build_id);
  hello.setToken(as_data(h.token));
  auto ops = hello.initOps(static_cast<unsigned>(h.operations.size()));
  for (unsigned i = 0; i < ops.size(); ++i) {
    ops[i].setName(h.operations[i].name);
    ops[i].setVersion(h.operations[i].version);
  }
  hello.setFingerprint(h.fingerprint);
  hello.setTrainerKey(as_data(h.trainer_key));
  hello.setName(h.name);
  hello.setRank(h.rank ? static_cast<std::int64_t>(*h.rank) : -1);
  return to_bytes(message);
}

HelloFields read_hello(std::span<const char> bytes) {
  return read<wire::Hello>(bytes, [](wire::Hello::Reader r) {
    HelloFields h;
    h.protocol = r.getProtocol();
    h.build_id = text(r.getBuildId(), "build id");
    h.token = data(r.getToken(), "token");
    if (r.getOps().size() > 256) throw RemoteError("malformed message: too many operations");
    for (auto op : r.getOps())
      h.operations.push_back({text(op.getName(), "operation"), op.getVersion()});
    h.fingerprint = r.getFingerprint();
    h.trainer_key = data(r.getTrainerKey(), "trainer key");
    h.name = text(r.getName(), "name");
    const auto rank = r.getRank();
    if (rank < -1 || rank > std::int64_t{0xffffffff})
      throw RemoteError(fmt::format("malformed message: rank {}", rank));
    if (rank >= 0) h.rank = static_cast<std::uint32_t>(rank);
    return h;
  });
}

std::vector<char> write_welcome(const WelcomeFields& w) {
  capnp::MallocMessageBuilder message;
  auto welcome = message.initRoot<wire::Welcome>();
  welcome.setProtocol(w.protocol);
  welcome.setBuildId(w.build_id);
  welcome.setSessionKey(as_data(w.session_key));
  welcome.setWindow(w.window);
  welcome.setThreads(w.threads);
  welcome.setName(w.name);
  return to_bytes(message);
}

WelcomeFields read_welcome(std::span<const char> bytes) {
  return read<wire::Welcome>(bytes, [](wire::Welcome::Reader r) {
    WelcomeFields w;
    w.protocol = r.getProtocol();
    w.build_id = text(r.getBuildId(), "build id");
    w.session_key = data(r.getSessionKey(), "session key");
    w.window = r.getWindow();
    w.threads = r.getThreads();
    w.name = text(r.getName(), "name");
    if (w.session_key.size() != 16)
      throw RemoteError("malformed message: a session key of 16 bytes");
    return w;
  });
}

std::vector<char> write_join(const JoinFields& j) {
  capnp::MallocMessageBuilder message;
  auto join = message.initRoot<wire::Join>();
  join.setToken(as_data(j.token));
  join.setEndpoint(j.endpoint);
  return to_bytes(message);
}

JoinFields read_join(std::span<const char> bytes) {
  return read<wire::Join>(bytes, [](wire::Join::Reader r) {
    return JoinFields{data(r.getToken(), "token"), text(r.getEndpoint(), "endpoint")};
  });
}

std::vector<char> write_subscribe(const SubscribeFields& s) {
  capnp::MallocMessageBuilder message;
  auto sub = message.initRoot<wire::Subscribe>();
  sub.setToken(as_data(s.token));
  sub.setName(s.name);
  return to_bytes(message);
}

SubscribeFields read_subscribe(std::span<const char> bytes) {
  return read<wire::Subscribe>(bytes, [](wire::Subscribe::Reader r) {
    return SubscribeFields{data(r.getToken(), "token"), text(r.getName(), "name")};
  });
}

std::vector<char> write_worker_list(const WorkerListFields& l) {
  capnp::MallocMessageBuilder message;
  auto list = message.initRoot<wire::WorkerList>();
  list.setDirectoryKey(as_data(l.directory_key));
  auto out = list.initEndpoints(static_cast<unsigned>(l.endpoints.size()));
  for (unsigned i = 0; i < out.size(); ++i) out.set(i, l.endpoints[i]);
  return to_bytes(message);
}

WorkerListFields read_worker_list(std::span<const char> bytes) {
  return read<wire::WorkerList>(bytes, [](wire::WorkerList::Reader r) {
    WorkerListFields l;
    l.directory_key = data(r.getDirectoryKey(), "directory key");
    if (r.getEndpoints().size() > 65536) throw RemoteError("malformed message: too many workers");
    for (auto e : r.getEndpoints()) l.endpoints.push_back(text(e, "endpoint"));
    return l;
  });
}

std::vector<char> write_rank_weights(const RankWeightsFields& w) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<wire::RankWeights>();
  root.setToken(as_data(w.token));
  auto list = root.initWeights(static_cast<unsigned>(w.weights.size()));
  for (unsigned i = 0; i < list.size(); ++i) list.set(i, w.weights[i]);
  return to_bytes(message);
}

RankWeightsFields read_rank_weights(std::span<const char> bytes) {
  return read<wire::RankWeights>(bytes, [](wire::RankWeights::Reader r) {
    RankWeightsFields w;
    w.token = data(r.getToken(), "token");
    const auto list = r.getWeights();
    if (list.size() > RankWeightsFields::kMaxRanks)
      throw RemoteError(fmt::format("malformed message: {} rank weights", list.size()));
    for (auto x : list) {
      if (x == 0 || x > kMaxRankWeight)
        throw RemoteError(fmt::format("malformed message: a rank weight of {}", x));
      w.weights.push_back(x);
    }
    return w;
  });
}

}  // namespace brigade::transport::detail
