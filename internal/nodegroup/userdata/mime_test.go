package userdata

import (
	"strings"
	"testing"
)

// A boundary the way AWS's launch template examples write it, unquoted with special
// characters, is read as cloud-init reads it; a Content-Type that no reading can make
// sense of is still refused.
func TestUserPartsBoundaries(t *testing.T) {
	body := "\r\n--//\r\nContent-Type: text/x-shellscript\r\n\r\n#!/bin/bash\necho hi\r\n--//--\r\n"
	for _, ct := range []string{`multipart/mixed; boundary="//"`, `multipart/mixed; boundary=//`, `Multipart/Mixed; charset=utf-8; BOUNDARY=//`} {
		parts, err := userParts("MIME-Version: 1.0\r\nContent-Type: " + ct + "\r\n" + body)
		if err != nil || len(parts) != 1 || !strings.Contains(parts[0].body, "echo hi") {
			t.Errorf("Content-Type %s: %+v, %v", ct, parts, err)
		}
	}
	for _, ct := range []string{`multipart/mixed; boundary=`, `text/plain; x=//`} {
		if _, err := userParts("MIME-Version: 1.0\r\nContent-Type: " + ct + "\r\n" + body); err == nil {
			t.Errorf("Content-Type %s was accepted", ct)
		}
	}
}
