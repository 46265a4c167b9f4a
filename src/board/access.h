// Who the board answers, apart from HTTP so that it can be tested without listening beyond
// loopback: the Host names a board answers (against DNS rebinding), and the page's warning when
// it listens on more than the loopback interface. docs/tensorboard.md, "Security model".
//
//   const HostCheck check("127.0.0.1", {"board.lan"});
//   if (auto refusal = check.refusal(req.get_header_value("Host"))) ... 403 *refusal ...
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainhooks::board::internal {

// The Host header values a board listening on `listen_host` answers: "localhost", "127.0.0.1",
// "[::1]", `listen_host` itself (unless it is 0.0.0.0 or ::) and the `allowed` names, each with
// any port or none, in any case. A board listening beyond loopback with no `allowed` names
// answers any name.
class HostCheck {
 public:
  // `allowed` as check_allowed_host() (board_server.h) accepts them.
  HostCheck(std::string_view listen_host, const std::vector<std::string>& allowed);

  // nullopt when a request with this Host header is answered; else why not, for the 403.
  std::optional<std::string> refusal(std::string_view host_header) const;

 private:
  std::string listen_host_;
  std::vector<std::string> names_;  // as in a Host header, in lower case; empty: any
};

// The board page's HTML as a board listening on `listen_host` serves it: beyond loopback, with a
// banner saying that the board is reachable from the network.
std::string served_page(std::string_view listen_host);

}  // namespace trainhooks::board::internal
