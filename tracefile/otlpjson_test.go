package tracefile

import (
	"bytes"
	"testing"
)

func TestWireTranscoderMatchesGeneratedPath(t *testing.T) {
	for i, body := range [][]byte{
		mustMarshal(t, fullRequest(1)),
		mustMarshal(t, realisticRequest(2, 50)),
		mustMarshal(t, merge(fullRequest(3), realisticRequest(4, 3))),
		{},
	} {
		fast, err := appendRequestJSONWire(nil, body)
		if err != nil {
			t.Fatalf("request %d: the wire transcoder gave up on a canonical request: %v", i, err)
		}
		slow, err := appendProtoAsJSONSlow(nil, body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fast, slow) {
			t.Fatalf("request %d:\nwire:      %s\ngenerated: %s", i, fast, slow)
		}
	}
	// Non-canonical forms go the generated way and still come out right: a status sent twice
	// (protobuf merges the two), and a negative kind.
	span := []byte{0x0a, 16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
		0x7a, 2, 0x18, 2, // status {code: 2}
		0x7a, 4, 0x12, 2, 'h', 'i', // status {message: "hi"}
		0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, // kind: -1
	}
	ss := append([]byte{0x12, byte(len(span))}, span...)
	rs := append([]byte{0x12, byte(len(ss))}, ss...)
	body := append([]byte{0x0a, byte(len(rs))}, rs...)
	if _, err := appendRequestJSONWire(nil, body); err == nil {
		t.Fatal("a repeated singular message must send the wire transcoder to the generated path")
	}
	js, err := ProtoToJSON(body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"kind":-1`)) || !bytes.Contains(js, []byte(`"status":{"message":"hi","code":2}`)) {
		t.Fatalf("got %s", js)
	}
}

// FuzzProtoToJSON holds the wire transcoder to the generated path: whenever it succeeds, the
// generated path must succeed with the same bytes.
func FuzzProtoToJSON(f *testing.F) {
	f.Add(mustMarshal(f, fullRequest(1)))
	f.Add(mustMarshal(f, realisticRequest(0, 2)))
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, err := appendRequestJSONWire(nil, body)
		if err != nil {
			return
		}
		slow, err := appendProtoAsJSONSlow(nil, body)
		if err != nil {
			t.Fatalf("wire transcoder accepted what the generated decoder rejects (%v):\n%s", err, fast)
		}
		if !bytes.Equal(fast, slow) {
			t.Fatalf("wire:      %s\ngenerated: %s", fast, slow)
		}
	})
}
