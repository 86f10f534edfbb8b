// The signer against AWS's published vectors (sigv4_vectors/SOURCE.md says which).
#include "transport/storage/detail/sigv4.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace brigade::transport::detail {
namespace {

std::string read(const std::string& name) {
  std::ifstream file(std::string(BRIGADE_SIGV4_VECTORS) + "/" + name, std::ios::binary);
  EXPECT_TRUE(file) << name;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<std::pair<std::string, std::string>> split_query(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    auto amp = text.find('&');
    std::string_view pair = text.substr(0, amp);
    auto equals = pair.find('=');
    out.emplace_back(std::string(pair.substr(0, equals)),
                     equals == std::string_view::npos ? "" : std::string(pair.substr(equals + 1)));
    text = amp == std::string_view::npos ? std::string_view() : text.substr(amp + 1);
  }
  return out;
}

// A suite .req file: "METHOD target HTTP/1.1", "Name:value" lines, a blank line, the body.
SignableRequest parse_req(const std::string& text) {
  SignableRequest request;
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);
  request.method = line.substr(0, line.find(' '));
  std::string target = line.substr(line.find(' ') + 1, line.rfind(' ') - line.find(' ') - 1);
  auto question = target.find('?');
  request.path = target.substr(0, question);
  if (question != std::string::npos) request.query = split_query(target.substr(question + 1));
  while (std::getline(lines, line) && !line.empty()) {
    auto colon = line.find(':');
    request.headers.emplace_back(line.substr(0, colon), line.substr(colon + 1));
  }
  std::string body((std::istreambuf_iterator<char>(lines)), std::istreambuf_iterator<char>());
  request.payload_hash = sha256_hex(body);
  return request;
}

class SigV4Suite : public testing::TestWithParam<const char*> {};

TEST_P(SigV4Suite, MatchesPublishedCanonicalRequestStringToSignAndAuthorization) {
  std::string name = GetParam();
  SignableRequest request = parse_req(read(name + ".req"));
  Signature signature = sign_v4(request, {"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                          "us-east-1", "service", "20150830T123600Z"});
  EXPECT_EQ(signature.canonical_request, read(name + ".creq"));
  EXPECT_EQ(signature.string_to_sign, read(name + ".sts"));
  EXPECT_EQ(signature.authorization, read(name + ".authz"));
}

INSTANTIATE_TEST_SUITE_P(AwsTestSuite, SigV4Suite,
                         testing::Values("get-vanilla", "get-vanilla-query-order-key-case",
                                         "get-vanilla-query-order-value",
                                         "get-vanilla-query-unreserved", "get-vanilla-utf8-query",
                                         "get-vanilla-empty-query-key", "get-header-value-trim",
                                         "get-header-key-duplicate", "get-unreserved", "get-utf8",
                                         "get-space", "post-vanilla", "post-x-www-form-urlencoded",
                                         "post-sts-header-before"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// S3's own examples: a range header, a '$' in the key encoded once, sub-resource and
// list queries, x-amz-content-sha256 signed.
TEST(SigV4, MatchesS3DocumentationExamples) {
  std::istringstream lines(read("s3_examples.txt"));
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::istringstream parts(line);
    for (std::string field; std::getline(parts, field, '|');) fields.push_back(field);
    fields.resize(6);
    SignableRequest request{
        fields[0], fields[1], split_query(fields[2]), {}, sha256_hex(fields[4])};
    request.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                       {"x-amz-date", "20130524T000000Z"},
                       {"x-amz-content-sha256", request.payload_hash}};
    std::istringstream extra(fields[3]);
    for (std::string header; std::getline(extra, header, ';');) {
      request.headers.emplace_back(header.substr(0, header.find(':')),
                                   header.substr(header.find(':') + 1));
    }
    Signature signature =
        sign_v4(request, {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                          "us-east-1", "s3", "20130524T000000Z"});
    EXPECT_EQ(signature.authorization.substr(signature.authorization.size() - 64), fields[5])
        << line;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(SigV4, EncodesKeysOnceKeepingSlashes) {
  EXPECT_EQ(uri_encode("/a b/c+d%20é~x.jpg", true), "/a%20b/c%2Bd%2520%C3%A9~x.jpg");
  EXPECT_EQ(uri_encode("a/b", false), "a%2Fb");
  EXPECT_EQ(canonical_query({{"prefix", "a/b c"}, {"list-type", "2"}}),
            "list-type=2&prefix=a%2Fb%20c");
}

TEST(SigV4, FormatsAmzDate) { EXPECT_EQ(amz_date(1440938160), "20150830T123600Z"); }

}  // namespace
}  // namespace brigade::transport::detail
