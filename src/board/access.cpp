#include "board/access.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "board/assets.h"
#include "board/escape_html.h"
#include "trainhooks/board/board_server.h"
#include "trainhooks/errors.h"

namespace trainhooks::board {
namespace {

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A host as it appears in a Host header: an IPv6 address in brackets, names in lower case.
std::string host_header_form(std::string_view host) {
  if (host.find(':') != std::string_view::npos && !host.starts_with('[')) {
    return "[" + lowercase(host) + "]";
  }
  return lowercase(host);
}

// The name in a Host header without its port ("[::1]:6006" -> "[::1]", "localhost:6006" ->
// "localhost"), in lower case; nullopt unless what follows the name is nothing, or ':' and a
// port number.
std::optional<std::string> host_name(std::string_view header) {
  size_t end = 0;
  if (header.starts_with('[')) {
    end = header.find(']');
    if (end == std::string_view::npos) return std::nullopt;
    ++end;
  } else {
    end = std::min(header.find(':'), header.size());
  }
  const std::string_view port = header.substr(end);
  if (!port.empty()) {
    const std::string_view digits = port.substr(1);
    if (port[0] != ':' || digits.empty() || digits.size() > 5 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
  }
  return lowercase(header.substr(0, end));
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  if (lowercase(host) == "localhost") return true;
  const std::string text(host);
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return false;
}

void check_allowed_host(std::string_view name) {
  std::string_view address = name;
  if (address.starts_with('[') && address.ends_with(']')) {
    address = address.substr(1, address.size() - 2);
  }
  in6_addr v6{};
  if (address.find(':') != std::string_view::npos &&
      ::inet_pton(AF_INET6, std::string(address).c_str(), &v6) == 1) {
    return;
  }
  const bool name_chars = std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (name.empty() || !name_chars) {
    throw InvalidArgument(fmt::format(
        "allowed host '{}' is not a host name (letters, digits, '-', '_' and '.', or an IPv6 "
        "address; no port)",
        name));
  }
}

namespace internal {

HostCheck::HostCheck(std::string_view listen_host, const std::vector<std::string>& allowed)
    : listen_host_(listen_host) {
  if (!is_loopback_host(listen_host) && allowed.empty()) return;
  const auto add = [&](std::string name) {
    if (std::find(names_.begin(), names_.end(), name) == names_.end()) {
      names_.push_back(std::move(name));
    }
  };
  add("localhost");
  add("127.0.0.1");
  add("[::1]");
  // The address listened on, unless it stands for every address.
  if (listen_host != "0.0.0.0" && listen_host != "::" && !listen_host.empty()) {
    add(host_header_form(listen_host));
  }
  for (const std::string& name : allowed) add(host_header_form(name));
}

std::optional<std::string> HostCheck::refusal(std::string_view host_header) const {
  if (names_.empty()) return std::nullopt;
  const std::optional<std::string> name = host_name(host_header);
  if (name && std::find(names_.begin(), names_.end(), *name) != names_.end()) return std::nullopt;
  return fmt::format(
      "host '{}' refused: a board listening on {} answers requests to {} only (allow others "
      "with --allow-host)",
      host_header, listen_host_, fmt::join(names_, ", "));
}

std::string served_page(std::string_view listen_host) {
  std::string html(find_asset("/")->data);
  static constexpr std::string_view kMarker = "<!--network-warning-->";
  const size_t at = html.find(kMarker);
  if (is_loopback_host(listen_host) || at == std::string::npos) return html;
  html.replace(at, kMarker.size(),
               fmt::format("<div id=\"network-warning\" class=\"network-warning\" role=\"alert\">"
                           "This board listens on {} and is reachable from the network: anyone "
                           "who can reach its port can read these runs (there is no "
                           "authentication).</div>",
                           escape_html(listen_host)));
  return html;
}

}  // namespace internal
}  // namespace trainhooks::board
