// Package protocol is the local AWS's wire layer: it reads requests and writes answers
// in the protocols the services speak — the Query protocol (form parameters, with
// EC2's flat lists and the other services' member lists), XML answers, AWS's error
// documents (EC2's Response/Errors, Query's ErrorResponse, JSON's __type) — and holds
// what several services share on the wire: EC2-style filters with glob values, one
// pager, and SigV4 signatures. It imports nothing of the local AWS.
//
// aws-sdk-go-v2 holds the client side of these protocols only (serializers for
// requests, deserializers for answers); the server side is written here, once.
package protocol
