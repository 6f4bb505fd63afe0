// Package joinlog reads what the logs say about a node's join: a kubelet that
// authenticated as another node, the kubelet's telling errors, and nodejoin-controller's
// token decisions. It imports only sandbox/instance (for its log conventions).
package joinlog

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// nodeUserRE finds the user an authorization error names: the Node authorizer and
// NodeRestriction quote it as User "system:node:NAME".
var nodeUserRE = regexp.MustCompile(`User \\?"system:node:([^"\\]+)\\?"`)

// ForeignIdentity reads a kubelet log for a refusal that shows it authenticated as
// another node; it returns that node and the log line.
func ForeignIdentity(kubeletLog, self string) (other, line string) {
	eachLine(kubeletLog, func(l string) {
		if !strings.Contains(l, "forbidden") {
			return
		}
		if m := nodeUserRE.FindStringSubmatch(l); m != nil && m[1] != self {
			// The registration attempt says it best; keep the first of those.
			if other == "" || !strings.Contains(line, "register node") {
				other, line = m[1], l
			}
		}
	})
	return other, line
}

// ForeignIdentityReason is the reason given for a node that authenticated as another.
func ForeignIdentityReason(self, other string) string {
	return fmt.Sprintf("the API server authenticated this kubelet as system:node:%s, not as %s: the instance presented credentials that belong to another instance, so the Node authorizer and NodeRestriction never let it act as %s", other, self, self)
}

// WebhookDecisions returns the controller log's token decisions about user, and the
// last denial of any token.
func WebhookDecisions(logPath, user string) (accepted []string, lastDenied string) {
	eachLine(logPath, func(l string) {
		switch {
		case strings.Contains(l, `msg="token accepted"`) && strings.Contains(l, " user="+user+" "):
			accepted = append(accepted, l)
		case strings.Contains(l, `msg="token denied"`):
			lastDenied = l
		}
	})
	return accepted, lastDenied
}

// userRE finds the user of a "token accepted" line.
var userRE = regexp.MustCompile(` user=(\S+) `)

// AcceptedUsers returns every user the controller log shows a token accepted for.
func AcceptedUsers(logPath string) map[string]bool {
	users := map[string]bool{}
	eachLine(logPath, func(l string) {
		if strings.Contains(l, `msg="token accepted"`) {
			if m := userRE.FindStringSubmatch(l); m != nil {
				users[m[1]] = true
			}
		}
	})
	return users
}

// telling are the kubelet errors that explain a stuck join, by what they contain.
var telling = []string{"forbidden", "Unauthorized", "Unable to register node", "x509", "certificate", "connection refused", "no such host", "getting credentials"}

// KubeletEvidence returns the kubelet log's last error line that explains a stuck join,
// else its last error line.
func KubeletEvidence(path string) string {
	var best string
	if !eachLine(path, func(l string) {
		if strings.HasPrefix(l, "E") && slices.ContainsFunc(telling, func(t string) bool { return strings.Contains(l, t) }) {
			best = l
		}
	}) {
		return ""
	}
	if best != "" {
		return best
	}
	return instance.LastErrorLine(path)
}

// eachLine calls fn with every line of the file at path; it reports false when the file
// cannot be read.
func eachLine(path string, fn func(line string)) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fn(sc.Text())
	}
	return true
}
