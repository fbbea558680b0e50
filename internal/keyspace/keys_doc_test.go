package keyspace_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/keyspace"
)

// TestKeys_documented: every key internal/keyspace/keys.go builds is in the key
// table of docs/architecture.md, under the name the table uses for its
// parameter (G, ID, NAME, SHA).
func TestKeys_documented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	k := keyspace.New("NS")
	arg := map[string]string{"Group": "G", "Waiting": "G", "WaitInfo": "G", "Active": "G", "Finished": "G", "Decisions": "G", "Launches": "G", "GroupSeries": "G", "Delayed": "G", "Schedule": "NAME", "Run": "ID", "Worker": "ID", "SlotEvents": "ID",
		"Policy": "NAME", "PolicyVersions": "NAME", "PolicyHistory": "NAME", "PolicyActivations": "NAME", "Blob": "SHA", "Idempotency": "SHA"}
	v := reflect.ValueOf(k)
	for i := range v.NumMethod() {
		m := v.Type().Method(i)
		if m.Name == "Prefix" || m.Name == "RunPrefix" || m.Name == "SlotEventsPrefix" {
			continue
		}
		var args []reflect.Value
		if m.Type.NumIn() == 2 {
			a, ok := arg[m.Name]
			if !ok {
				t.Errorf("Keys.%s takes an argument this test does not name", m.Name)
				continue
			}
			args = []reflect.Value{reflect.ValueOf(a)}
		}
		key := strings.TrimPrefix(v.Method(i).Call(args)[0].String(), k.Prefix())
		if !strings.Contains(string(doc), "`"+key+"`") {
			t.Errorf("Keys.%s builds %q, which docs/architecture.md's key table does not list", m.Name, key)
		}
	}
}
