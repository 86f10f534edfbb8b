#include "transport/storage/detail/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <ctime>
#include <map>

namespace brigade::transport::detail {
namespace {

std::string hex(const unsigned char* bytes, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

std::string hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &size);
  return {reinterpret_cast<const char*>(out), size};
}

// Trims the value and collapses inner runs of spaces into one (the suite's
// get-header-value-trim; values in quotes are not special).
std::string canonical_value(std::string_view value) {
  std::string out;
  bool space = false;
  for (char c : value) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

}  // namespace

std::string uri_encode(std::string_view text, bool keep_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
    if (unreserved) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
  }
  return out;
}

std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  for (const auto& [name, value] : query)
    encoded.emplace_back(uri_encode(name, false), uri_encode(value, false));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out += '&';
    out += name + '=' + value;
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return hex(digest, sizeof digest);
}

std::string amz_date(long long unix_seconds) {
  std::time_t time = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&time, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
  return text;
}

Signature sign_v4(const SignableRequest& request, const SigningScope& scope) {
  // Lower-case names, sorted; repeated headers joined with ',' in the order sent.
  std::map<std::string, std::string> headers;
  for (const auto& [name, value] : request.headers) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    auto [it, fresh] = headers.try_emplace(lower, canonical_value(value));
    if (!fresh) it->second += ',' + canonical_value(value);
  }
  std::string canonical_headers, signed_headers;
  for (const auto& [name, value] : headers) {
    canonical_headers += name + ':' + value + '\n';
    signed_headers += (signed_headers.empty() ? "" : ";") + name;
  }
  Signature out;
  out.canonical_request = request.method + '\n' + uri_encode(request.path, true) + '\n' +
                          canonical_query(request.query) + '\n' + canonical_headers + '\n' +
                          signed_headers + '\n' + request.payload_hash;
  std::string date(scope.amz_date.substr(0, 8));
  std::string credential_scope =
      date + '/' + std::string(scope.region) + '/' + std::string(scope.service) + "/aws4_request";
  out.string_to_sign = "AWS4-HMAC-SHA256\n" + std::string(scope.amz_date) + '\n' +
                       credential_scope + '\n' + sha256_hex(out.canonical_request);
  std::string key = hmac("AWS4" + std::string(scope.secret_access_key), date);
  key = hmac(key, scope.region);
  key = hmac(key, scope.service);
  key = hmac(key, "aws4_request");
  std::string signature = hmac(key, out.string_to_sign);
  out.authorization =
      "AWS4-HMAC-SHA256 Credential=" + std::string(scope.access_key_id) + '/' + credential_scope +
      ", SignedHeaders=" + signed_headers + ", Signature=" +
      hex(reinterpret_cast<const unsigned char*>(signature.data()), signature.size());
  return out;
}

}  // namespace brigade::transport::detail
