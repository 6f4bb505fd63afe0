package protocol

import (
	"context"
	"time"
)

// Caller is who signed a request, as SigV4 verification found it: what STS's
// GetCallerIdentity answers, and what a handler may check permissions against.
type Caller struct {
	// ARN is the IAM user's ARN (arn:aws:iam::ACCOUNT:user/NAME) or the session's
	// (arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION).
	ARN string
	// UserID is the user's unique ID (AIDA…), or ROLEID:SESSION for a role session.
	UserID    string
	Account   string
	AccessKey string
	// Role is the role of a role session ("" for a user): trust policies that name
	// the role's ARN admit its sessions.
	Role string
}

// Session tells whether the caller is a role session (temporary credentials).
func (c Caller) Session() bool { return c.Role != "" }

// Credential is a secret access key and what signing with it proves.
type Credential struct {
	Secret string
	// SessionToken is the token temporary credentials must be sent with; "" for a
	// user's long-term key.
	SessionToken string
	// Expiration ends temporary credentials; zero for a long-term key.
	Expiration time.Time
	Caller     Caller
}

// CredentialLookup finds the credential of an access key ID; false for a key the
// account does not know.
type CredentialLookup func(accessKeyID string) (Credential, bool)

type callerKey struct{}

// WithCaller returns ctx carrying the verified caller of a request.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the verified caller a request's context carries; false when the
// request was not verified (it did not come through the edge).
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}
