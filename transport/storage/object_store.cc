#include "transport/storage/object_store.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "transport/storage/detail/aws_config.h"
#include "transport/storage/detail/http.h"
#include "transport/storage/detail/sigv4.h"

namespace brigade::transport {
namespace {

class StorageCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "brigade.storage"; }
  std::string message(int value) const override {
    return std::string(storage_code_name(static_cast<StorageErrc>(value)));
  }
  std::error_condition default_error_condition(int value) const noexcept override {
    switch (static_cast<StorageErrc>(value)) {
      case StorageErrc::throttled:
      case StorageErrc::server_error:
        return std::errc::resource_unavailable_try_again;
      case StorageErrc::timed_out:
        return std::errc::timed_out;
      case StorageErrc::connection_lost:
        return std::errc::connection_reset;
      case StorageErrc::unreachable:
        return std::errc::connection_refused;
      case StorageErrc::not_found:
        return std::errc::no_such_file_or_directory;
      case StorageErrc::access_denied:
      case StorageErrc::tls_failed:
        return std::errc::permission_denied;
      case StorageErrc::bad_request:
      case StorageErrc::invalid_url:
        return std::errc::invalid_argument;
      case StorageErrc::out_of_range:
        return std::errc::result_out_of_range;
      case StorageErrc::short_body:
      case StorageErrc::bad_response:
      case StorageErrc::changed:
        return std::errc::bad_message;
      case StorageErrc::unsupported:
        return std::errc::operation_not_supported;
      case StorageErrc::cancelled:
        return std::errc::operation_canceled;
    }
    return {value, *this};
  }
};

bool transient(StorageErrc code) {
  return code == StorageErrc::throttled || code == StorageErrc::server_error ||
         code == StorageErrc::timed_out || code == StorageErrc::connection_lost ||
         code == StorageErrc::unreachable;
}

[[noreturn]] void bad_url(std::string_view url, const std::string& why) {
  throw StorageError(StorageErrc::invalid_url, std::string(url),
                     "not an object URL (" + why + "): " + std::string(url));
}

// The text of <tag>…</tag>'s first occurrence in an S3 XML document (no entities but
// the five XML ones: keys are plain UTF-8 in ListObjectsV2 without encoding-type).
std::string xml_text(std::string_view xml, std::string_view tag, std::size_t* from = nullptr) {
  std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  auto begin = xml.find(open, from ? *from : 0);
  if (begin == std::string_view::npos) return {};
  begin += open.size();
  auto end = xml.find(close, begin);
  if (end == std::string_view::npos) return {};
  if (from) *from = end + close.size();
  std::string out;
  std::string_view text = xml.substr(begin, end - begin);
  static constexpr std::pair<std::string_view, char> kEntities[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  for (std::size_t i = 0; i < text.size();) {
    bool replaced = false;
    for (auto [entity, c] : kEntities) {
      if (text.substr(i, entity.size()) == entity) {
        out += c;
        i += entity.size();
        replaced = true;
        break;
      }
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

std::optional<std::uint64_t> number(std::string_view text) {
  std::uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::string_view as_text(const std::vector<std::byte>& body) {
  return {reinterpret_cast<const char*>(body.data()), body.size()};
}

}  // namespace

const std::error_category& storage_category() noexcept {
  static const StorageCategory category;
  return category;
}

std::error_code make_error_code(StorageErrc code) noexcept {
  return {static_cast<int>(code), storage_category()};
}

std::string_view storage_code_name(StorageErrc code) {
  switch (code) {
    case StorageErrc::throttled:
      return "throttled";
    case StorageErrc::server_error:
      return "server_error";
    case StorageErrc::timed_out:
      return "timed_out";
    case StorageErrc::connection_lost:
      return "connection_lost";
    case StorageErrc::unreachable:
      return "unreachable";
    case StorageErrc::not_found:
      return "not_found";
    case StorageErrc::access_denied:
      return "access_denied";
    case StorageErrc::bad_request:
      return "bad_request";
    case StorageErrc::out_of_range:
      return "out_of_range";
    case StorageErrc::short_body:
      return "short_body";
    case StorageErrc::bad_response:
      return "bad_response";
    case StorageErrc::invalid_url:
      return "invalid_url";
    case StorageErrc::unsupported:
      return "unsupported";
    case StorageErrc::tls_failed:
      return "tls_failed";
    case StorageErrc::changed:
      return "changed";
    case StorageErrc::cancelled:
      return "cancelled";
  }
  return "unknown storage error";
}

StorageError::StorageError(StorageErrc code, std::string url, const std::string& what,
                           std::string server_code, int http_status)
    : std::system_error(make_error_code(code), what),
      url_(std::move(url)),
      server_code_(std::move(server_code)),
      http_status_(http_status) {}

ObjectUrl ObjectUrl::parse(std::string_view url) {
  ObjectUrl out;
  std::string_view rest;
  if (url.rfind("s3://", 0) == 0) {
    rest = url.substr(5);
  } else if (url.rfind("https://", 0) == 0) {
    out.scheme = Scheme::https;
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    out.scheme = Scheme::http;
    rest = url.substr(7);
  } else {
    bad_url(url, "the scheme is none of s3://, https://, http://");
  }
  if (url.find('#') != std::string_view::npos) bad_url(url, "a fragment");
  auto slash = rest.find('/');
  std::string_view first = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (out.scheme == Scheme::s3) {
    bool valid = first.size() >= 3 && first.size() <= 63 &&
                 std::all_of(first.begin(), first.end(), [](char c) {
                   return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
                 });
    if (!valid) bad_url(url, "a bucket name is 3 to 63 of a-z 0-9 . -");
    out.bucket = std::string(first);
    out.key = path.empty() ? std::string() : std::string(path.substr(1));
    return out;
  }
  if (first.empty() || first.find('@') != std::string_view::npos) bad_url(url, "no host");
  out.authority = std::string(first);
  auto question = path.find('?');
  out.key = path.empty() ? "/" : std::string(path.substr(0, question));
  if (question != std::string_view::npos) out.query = std::string(path.substr(question + 1));
  return out;
}

std::string ObjectUrl::str() const {
  if (scheme == Scheme::s3) return "s3://" + bucket + "/" + key;
  std::string out = (scheme == Scheme::https ? "https://" : "http://") + authority + key;
  return query.empty() ? out : out + "?" + query;
}

struct ObjectStore::Impl {
  StoreOptions options;
  std::optional<Credentials> credentials;
  std::string region;
  std::string endpoint;  // scheme://authority, no trailing slash; empty: AWS
  detail::HttpClient http;
  std::atomic<std::uint64_t> requests{0}, retries{0}, bytes{0};
  std::mutex hosts_mutex;
  std::map<std::string, HostStats> hosts;  // by Prepared::host

  void count(const std::string& host, std::uint64_t requests_, std::uint64_t retries_,
             std::uint64_t failures_, std::uint64_t bytes_) {
    std::lock_guard lock(hosts_mutex);
    auto& h = hosts[host];
    h.requests += requests_;
    h.retries += retries_;
    h.failures += failures_;
    h.bytes += bytes_;
  }

  explicit Impl(StoreOptions given) : Impl(std::move(given), detail::load_aws_config()) {}
  Impl(StoreOptions given, const detail::AwsConfig& config)
      : options(with_ca_file(std::move(given), config)), http(options) {
    credentials = options.credentials ? options.credentials : config.credentials;
    if (options.anonymous) credentials.reset();
    region = options.region.value_or(config.region);
    endpoint = options.endpoint.value_or(config.endpoint);
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  }

  static StoreOptions with_ca_file(StoreOptions options, const detail::AwsConfig& config) {
    if (options.ca_file.empty()) options.ca_file = config.ca_bundle;
    return options;
  }

  // A request to an object (or, with `query`, its bucket), ready to send.
  struct Prepared {
    std::string host;  // the pool's key
    detail::HttpRequest request;
  };

  Prepared prepare(const ObjectUrl& url, std::string method, std::vector<std::string> extra,
                   const std::vector<std::pair<std::string, std::string>>& query = {}) {
    Prepared out;
    out.request.method = method;
    out.request.display_url = url.scheme == ObjectUrl::Scheme::s3 ? url.str() : strip_query(url);
    if (url.scheme != ObjectUrl::Scheme::s3) {  // sent as given: public or presigned
      out.host = (url.scheme == ObjectUrl::Scheme::https ? "https://" : "http://") + url.authority;
      out.request.url = url.str();
      out.request.headers = std::move(extra);
      out.request.follow_redirects = true;
      return out;
    }
    std::string authority, path;
    if (!endpoint.empty()) {  // path-style
      out.host = endpoint;
      authority = endpoint.substr(endpoint.find("://") + 3);
      path = "/" + url.bucket + (url.key.empty() ? "" : "/" + url.key);  // a bucket: no slash
    } else {                                                             // virtual-hosted
      authority = url.bucket + ".s3." + region + ".amazonaws.com";
      out.host = "https://" + authority;
      path = "/" + url.key;
    }
    std::string canonical_query = detail::canonical_query(query);
    out.request.url = out.host + detail::uri_encode(path, true) +
                      (canonical_query.empty() ? "" : "?" + canonical_query);
    std::string empty_hash = detail::sha256_hex("");
    out.request.headers = extra;
    if (!credentials) return out;
    std::string date = detail::amz_date(std::chrono::duration_cast<std::chrono::seconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
    detail::SignableRequest signable{method, path, query, {}, empty_hash};
    signable.headers = {
        {"host", authority}, {"x-amz-content-sha256", empty_hash}, {"x-amz-date", date}};
    if (!credentials->session_token.empty()) {
      signable.headers.emplace_back("x-amz-security-token", credentials->session_token);
    }
    for (const auto& header : extra) {
      auto colon = header.find(':');
      signable.headers.emplace_back(header.substr(0, colon), header.substr(colon + 2));
    }
    detail::Signature signature = detail::sign_v4(
        signable, {credentials->access_key_id, credentials->secret_access_key, region, "s3", date});
    for (const auto& [name, value] : signable.headers) {  // `extra` is in already
      if (name.rfind("x-amz-", 0) == 0) out.request.headers.push_back(name + ": " + value);
    }
    out.request.headers.push_back("Authorization: " + signature.authorization);
    return out;
  }

  static std::string strip_query(const ObjectUrl& url) {
    ObjectUrl copy = url;
    copy.query.clear();
    return copy.str();
  }

  // One attempt's answer as ours: 2xx returned, anything else thrown with its kind.
  detail::HttpResponse check_status(detail::HttpResponse response,
                                    const detail::HttpRequest& request) {
    if (response.status >= 200 && response.status < 300) return response;
    std::string_view body = as_text(response.body);
    std::string server_code = xml_text(body, "Code"), message = xml_text(body, "Message");
    int status = response.status;
    StorageErrc code = StorageErrc::bad_request;
    if (server_code == "SlowDown" || status == 429 || status == 503) {
      code = StorageErrc::throttled;
    } else if (server_code == "RequestTimeout" || status == 408) {
      code = StorageErrc::timed_out;
    } else if (status >= 500) {
      code = StorageErrc::server_error;
    } else if (status == 404) {
      code = StorageErrc::not_found;
    } else if (status == 401 || status == 403) {
      code = StorageErrc::access_denied;
    } else if (status == 416) {
      code = StorageErrc::out_of_range;
    }
    std::string what = request.method + " " + request.display_url + ": " +
                       (server_code.empty() ? "" : server_code + " ") + "(HTTP " +
                       std::to_string(status) + ")" + (message.empty() ? "" : " " + message);
    throw StorageError(code, request.display_url, what, server_code, status);
  }

  // Sends, retrying transient failures with exponential backoff and full jitter;
  // `accept` checks a 2xx answer and may throw (a short body: permanent).
  template <typename Accept>
  auto send(const std::function<Prepared()>& make, Accept accept) {
    thread_local std::minstd_rand random(std::random_device{}());
    for (int attempt = 0;; ++attempt) {
      Prepared prepared = make();  // signed afresh: the date moves on
      const std::stop_token stop = prepared.request.stop;
      try {
        requests.fetch_add(1, std::memory_order_relaxed);
        detail::HttpResponse response =
            check_status(http.perform(prepared.host, prepared.request), prepared.request);
        bytes.fetch_add(response.body.size(), std::memory_order_relaxed);
        count(prepared.host, 1, attempt > 0 ? 1 : 0, 0, response.body.size());
        return accept(std::move(response), prepared.request);
      } catch (const StorageError& error) {
        const bool last = !transient(error.storage_code()) || attempt >= options.retries;
        count(prepared.host, 1, attempt > 0 ? 1 : 0, last ? 1 : 0, 0);
        if (last) throw;
      }
      retries.fetch_add(1, std::memory_order_relaxed);
      std::chrono::milliseconds ceiling = std::min(
          options.max_backoff, options.backoff * (std::int64_t{1} << std::min(attempt, 20)));
      std::uniform_int_distribution<long long> jitter(0, std::max<long long>(0, ceiling.count()));
      // The backoff, cut short by a stop (the next attempt then throws `cancelled`).
      std::mutex mutex;
      std::unique_lock lock(mutex);
      std::condition_variable_any().wait_for(lock, stop, std::chrono::milliseconds(jitter(random)),
                                             [] { return false; });
    }
  }
};

ObjectStore::ObjectStore(StoreOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
ObjectStore::~ObjectStore() = default;

std::vector<std::byte> ObjectStore::get(std::string_view url_text) {
  ObjectUrl url = ObjectUrl::parse(url_text);
  return impl_->send(
      [&] { return impl_->prepare(url, "GET", {}); },
      [&](detail::HttpResponse response, const detail::HttpRequest& request) {
        auto length = response.headers.find("content-length");
        if (length != response.headers.end() && number(length->second) != response.body.size()) {
          throw StorageError(StorageErrc::short_body, request.display_url,
                             "GET " + request.display_url + ": " +
                                 std::to_string(response.body.size()) +
                                 " bytes where Content-Length said " + length->second);
        }
        return std::move(response.body);
      });
}

std::vector<std::byte> ObjectStore::get(std::string_view url_text, std::uint64_t offset,
                                        std::uint64_t size) {
  if (size == 0) return {};
  ObjectUrl url = ObjectUrl::parse(url_text);
  std::uint64_t last = offset + size - 1;
  std::string range = "Range: bytes=" + std::to_string(offset) + "-" + std::to_string(last);
  return impl_->send(
      [&] {
        auto prepared = impl_->prepare(url, "GET", {range});
        prepared.request.expected_size = size;
        return prepared;
      },
      [&](detail::HttpResponse response, const detail::HttpRequest& request) {
        auto fail = [&](StorageErrc code, const std::string& why) -> std::vector<std::byte> {
          throw StorageError(code, request.display_url,
                             "GET " + request.display_url + " bytes " + std::to_string(offset) +
                                 "-" + std::to_string(last) + ": " + why);
        };
        auto length = response.headers.find("content-length");
        if (length != response.headers.end() && number(length->second) != response.body.size()) {
          return fail(StorageErrc::short_body, std::to_string(response.body.size()) +
                                                   " bytes where Content-Length said " +
                                                   length->second);
        }
        if (response.status == 200) {  // the server ignored Range: cut the range out
          if (response.body.size() < offset + size) {
            return fail(StorageErrc::out_of_range,
                        "the object has " + std::to_string(response.body.size()) + " bytes");
          }
          auto begin = response.body.begin() + static_cast<std::ptrdiff_t>(offset);
          return std::vector<std::byte>(begin, begin + static_cast<std::ptrdiff_t>(size));
        }
        // 206: "bytes first-last/total"; a range clamped at the object's end is out_of_range.
        auto content_range = response.headers.find("content-range");
        std::string expected = "bytes " + std::to_string(offset) + "-";
        if (content_range == response.headers.end() ||
            content_range->second.rfind(expected, 0) != 0) {
          return fail(StorageErrc::bad_response, "no matching Content-Range in the answer");
        }
        std::string_view rest = std::string_view(content_range->second).substr(expected.size());
        auto answered_last = number(rest.substr(0, rest.find('/')));
        if (answered_last != last) {
          return fail(StorageErrc::out_of_range, "the server sent " + content_range->second);
        }
        if (response.body.size() != size) {
          return fail(StorageErrc::short_body, std::to_string(response.body.size()) +
                                                   " bytes where " + content_range->second +
                                                   " was announced");
        }
        return std::move(response.body);
      });
}

void ObjectStore::get_stream(std::string_view url_text, std::uint64_t offset, std::uint64_t size,
                             const std::function<void(const std::byte*, std::size_t)>& sink,
                             std::uint64_t object_size, std::string_view etag,
                             std::stop_token stop) {
  if (size == 0) return;
  ObjectUrl url = ObjectUrl::parse(url_text);
  const std::uint64_t last = offset + size - 1;
  std::uint64_t delivered = 0;  // over all attempts: a retry asks for the rest only
  std::uint64_t skip = 0;       // this attempt: bytes before the range (a 200 answer)
  std::uint64_t received = 0;   // this attempt: bytes of the range delivered
  std::string host;
  auto fail = [&](StorageErrc code, const std::string& why) {
    throw StorageError(code, url.str(),
                       "GET " + url.str() + " bytes " + std::to_string(offset + delivered) + "-" +
                           std::to_string(last) + ": " + why);
  };
  auto check_head = [&](int status, const std::map<std::string, std::string>& headers) {
    skip = 0;
    received = 0;
    if (!etag.empty()) {
      auto answered = headers.find("etag");
      if (answered != headers.end() && answered->second != etag) {
        fail(StorageErrc::changed, "the object changed: ETag " + answered->second +
                                       " where it was read as " + std::string(etag));
      }
    }
    std::uint64_t total = 0;
    if (status == 200) {  // the server ignored Range: skip to it
      skip = offset + delivered;
      auto length = headers.find("content-length");
      total = length == headers.end() ? 0 : number(length->second).value_or(0);
      if (length != headers.end() && total <= last) {
        fail(StorageErrc::out_of_range, "the object has " + length->second + " bytes");
      }
    } else {
      auto content_range = headers.find("content-range");
      std::string expected =
          "bytes " + std::to_string(offset + delivered) + "-" + std::to_string(last) + "/";
      if (content_range == headers.end() || content_range->second.rfind(expected, 0) != 0) {
        fail(StorageErrc::bad_response, content_range == headers.end()
                                            ? std::string("no Content-Range in the answer")
                                            : "the server sent " + content_range->second);
      }
      total = number(std::string_view(content_range->second).substr(expected.size())).value_or(0);
    }
    if (object_size != 0 && total != 0 && total != object_size) {
      fail(StorageErrc::changed, "the object changed: " + std::to_string(total) +
                                     " bytes where it was read as " + std::to_string(object_size));
    }
  };
  auto on_body = [&](const std::byte* data, std::size_t n) {
    impl_->bytes.fetch_add(n, std::memory_order_relaxed);
    impl_->count(host, 0, 0, 0, n);
    const std::uint64_t skipped = std::min<std::uint64_t>(skip, n);
    skip -= skipped;
    data += skipped;
    n -= static_cast<std::size_t>(skipped);
    n = static_cast<std::size_t>(std::min<std::uint64_t>(n, size - delivered));
    if (n == 0) return;
    received += n;
    delivered += n;
    sink(data, n);
  };
  std::string range;
  impl_->send(
      [&] {
        range = "Range: bytes=" + std::to_string(offset + delivered) + "-" + std::to_string(last);
        auto prepared = impl_->prepare(url, "GET", {range});
        prepared.request.on_head = check_head;
        prepared.request.on_body = on_body;
        prepared.request.stop = stop;
        host = prepared.host;
        return prepared;
      },
      [&](detail::HttpResponse, const detail::HttpRequest&) {
        if (delivered != size) {
          fail(StorageErrc::short_body,
               "the answer ended after " + std::to_string(received) + " bytes of the range");
        }
        return 0;
      });
}

ObjectInfo ObjectStore::head(std::string_view url_text) {
  ObjectUrl url = ObjectUrl::parse(url_text);
  return impl_->send([&] { return impl_->prepare(url, "HEAD", {}); },
                     [&](detail::HttpResponse response, const detail::HttpRequest& request) {
                       auto length = response.headers.find("content-length");
                       std::optional<std::uint64_t> size;
                       if (length != response.headers.end()) size = number(length->second);
                       if (!size) {
                         throw StorageError(StorageErrc::bad_response, request.display_url,
                                            "HEAD " + request.display_url + ": no Content-Length");
                       }
                       auto etag = response.headers.find("etag");
                       return ObjectInfo{*size, etag == response.headers.end() ? "" : etag->second};
                     });
}

std::vector<ObjectEntry> ObjectStore::list(std::string_view prefix_url) {
  ObjectUrl url = ObjectUrl::parse(prefix_url);
  if (url.scheme != ObjectUrl::Scheme::s3) {
    throw StorageError(StorageErrc::unsupported, std::string(prefix_url),
                       "cannot list " + std::string(prefix_url) +
                           ": a web server has no listing; name the objects (a manifest)");
  }
  ObjectUrl bucket = url;
  bucket.key.clear();
  std::vector<ObjectEntry> entries;
  std::string token;
  do {
    std::vector<std::pair<std::string, std::string>> query = {
        {"list-type", "2"},
        {"prefix", url.key},
        {"max-keys", std::to_string(impl_->options.list_page_size)}};
    if (!token.empty()) query.emplace_back("continuation-token", token);
    token = impl_->send(
        [&] { return impl_->prepare(bucket, "GET", {}, query); },
        [&](detail::HttpResponse response, const detail::HttpRequest& request) {
          std::string_view xml = as_text(response.body);
          if (xml.find("<ListBucketResult") == std::string_view::npos) {
            throw StorageError(StorageErrc::bad_response, url.str(),
                               "list " + url.str() + ": not a ListBucketResult");
          }
          std::size_t at = 0;
          for (std::string item; !(item = xml_text(xml, "Contents", &at)).empty();) {
            auto size = number(xml_text(item, "Size"));
            std::string key = xml_text(item, "Key");
            if (!size || key.empty()) {
              throw StorageError(StorageErrc::bad_response, request.display_url,
                                 "list " + url.str() + ": an entry without key or size");
            }
            entries.push_back({std::move(key), *size, xml_text(item, "ETag")});
          }
          return xml_text(xml, "IsTruncated") == "true" ? xml_text(xml, "NextContinuationToken")
                                                        : std::string();
        });
  } while (!token.empty());
  std::sort(entries.begin(), entries.end(),
            [](const ObjectEntry& a, const ObjectEntry& b) { return a.key < b.key; });
  return entries;
}

StoreStats ObjectStore::stats() const {
  StoreStats out{impl_->requests.load(std::memory_order_relaxed),
                 impl_->retries.load(std::memory_order_relaxed),
                 impl_->bytes.load(std::memory_order_relaxed)};
  std::lock_guard lock(impl_->hosts_mutex);
  for (const auto& [host, h] : impl_->hosts) {
    out.hosts.push_back(h);
    out.hosts.back().host = host;
  }
  return out;
}

const std::string& ObjectStore::region() const { return impl_->region; }

}  // namespace brigade::transport
