// bench_http (issue 25 item 2): the storage client's pool of blocking curl handles
// (transport/storage/object_store.h: one io-stage thread per request in flight) against
// curl's multi interface (one thread driving every transfer), on the same range reads
// of one object, in one run. One JSON line per (client, requests in flight).
//
//   bench_http --url URL --size BYTES [--range 65536] [--requests 2000]
//              [--in-flight 8,32,128] [--clients pool,multi]
//
// URL is a plain http(s) object (sent unsigned, as the store sends public and presigned
// URLs): bench/http_clients.py serves one from s3rver behind the S3 fixture's proxy, with
// latency added per request. Each request reads --range bytes at a random offset and is
// checked (206, the length asked). Reported: requests_per_s, cpu_us_per_request (process
// CPU, every thread: load-independent) and threads (what each client holds).
#include <curl/curl.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "transport/storage/object_store.h"

namespace {

double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

struct Options {
  std::string url;
  std::uint64_t size = 0, range = 65536;
  int requests = 2000;
  std::vector<int> in_flight{8, 32, 128};
  std::vector<std::string> clients{"pool", "multi"};
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// The offsets every client reads, the same for each.
std::vector<std::uint64_t> offsets(const Options& o) {
  std::mt19937_64 random(25);
  std::uniform_int_distribution<std::uint64_t> pick(0, o.size - o.range);
  std::vector<std::uint64_t> out(static_cast<std::size_t>(o.requests));
  for (auto& x : out) x = pick(random);
  return out;
}

// The storage client as the io stage uses it: `in_flight` threads, each blocking on one
// request at a time, the store's per-host cap set to match.
void run_pool(const Options& o, int in_flight, const std::vector<std::uint64_t>& at) {
  brigade::transport::StoreOptions options;
  options.max_requests_per_host = in_flight;
  options.anonymous = true;
  brigade::transport::ObjectStore store(options);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < in_flight; ++t) {
    threads.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1)) < at.size();) {
        if (store.get(o.url, at[i], o.range).size() != o.range) throw std::runtime_error("short");
      }
    });
  }
  for (auto& t : threads) t.join();
}

struct Transfer {
  CURL* easy = nullptr;
  std::vector<char> body;
  std::string range;
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto& body = static_cast<Transfer*>(user)->body;
  body.insert(body.end(), data, data + size * count);
  return size * count;
}

// curl's multi interface: one thread, `in_flight` transfers at once on as many
// connections, each started again with the next offset as it completes.
void run_multi(const Options& o, int in_flight, const std::vector<std::uint64_t>& at) {
  CURLM* multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, long(in_flight));
  std::vector<Transfer> transfers(static_cast<std::size_t>(in_flight));
  std::size_t next = 0, done = 0;
  auto start = [&](Transfer& t) {
    const auto offset = at[next++];
    t.body.clear();
    t.range = std::to_string(offset) + "-" + std::to_string(offset + o.range - 1);
    curl_easy_setopt(t.easy, CURLOPT_RANGE, t.range.c_str());
    curl_multi_add_handle(multi, t.easy);
  };
  for (auto& t : transfers) {
    t.easy = curl_easy_init();
    t.body.reserve(o.range);
    curl_easy_setopt(t.easy, CURLOPT_URL, o.url.c_str());
    curl_easy_setopt(t.easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(t.easy, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(t.easy, CURLOPT_PRIVATE, &t);
    curl_easy_setopt(t.easy, CURLOPT_NOSIGNAL, 1L);
    if (next < at.size()) start(t);
  }
  while (done < at.size()) {
    int running = 0;
    curl_multi_perform(multi, &running);
    int left = 0;
    while (CURLMsg* message = curl_multi_info_read(multi, &left)) {
      if (message->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &t);
      long status = 0;
      curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
      if (message->data.result != CURLE_OK || status != 206 || t->body.size() != o.range) {
        throw std::runtime_error("multi: request failed (" +
                                 std::string(curl_easy_strerror(message->data.result)) + ", HTTP " +
                                 std::to_string(status) + ")");
      }
      curl_multi_remove_handle(multi, t->easy);
      ++done;
      if (next < at.size()) start(*t);
    }
    if (done < at.size()) curl_multi_poll(multi, nullptr, 0, 100, nullptr);
  }
  for (auto& t : transfers) curl_easy_cleanup(t.easy);
  curl_multi_cleanup(multi);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i], value = argv[i + 1];
    if (name == "--url")
      o.url = value;
    else if (name == "--size")
      o.size = std::stoull(value);
    else if (name == "--range")
      o.range = std::stoull(value);
    else if (name == "--requests")
      o.requests = std::stoi(value);
    else if (name == "--clients")
      o.clients = split(value);
    else if (name == "--in-flight") {
      o.in_flight.clear();
      for (const auto& n : split(value)) o.in_flight.push_back(std::stoi(n));
    } else {
      std::fprintf(stderr, "bench_http: unknown option %s\n", name.c_str());
      return 2;
    }
  }
  if (o.url.empty() || o.size < o.range) {
    std::fprintf(stderr, "usage: bench_http --url URL --size BYTES [--range B] ...\n");
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const auto at = offsets(o);
  for (int in_flight : o.in_flight) {
    for (const auto& client : o.clients) {
      const double cpu0 = cpu_s();
      const auto t0 = std::chrono::steady_clock::now();
      if (client == "pool") {
        run_pool(o, in_flight, at);
      } else if (client == "multi") {
        run_multi(o, in_flight, at);
      } else {
        std::fprintf(stderr, "bench_http: unknown client %s\n", client.c_str());
        return 2;
      }
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double cpu = cpu_s() - cpu0;
      std::printf(
          "{\"bench\": \"http\", \"client\": \"%s\", \"in_flight\": %d, \"requests\": %d, "
          "\"range\": %llu, \"requests_per_s\": %.1f, \"cpu_us_per_request\": %.1f, "
          "\"threads\": %d}\n",
          client.c_str(), in_flight, o.requests, static_cast<unsigned long long>(o.range),
          double(o.requests) / wall, cpu / o.requests * 1e6, client == "pool" ? in_flight : 1);
      std::fflush(stdout);
    }
  }
  curl_global_cleanup();
}
