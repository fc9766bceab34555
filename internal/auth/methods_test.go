package auth

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/schema"
)

// TestMethodRights_EveryMethodHasARule fails when a method a client can send
// (ACP's, stable or draft, or acphub's own) has no rule of its own in the
// schema's x-acphub-rights: adding one to the schema, or updating ACP's
// method lists, needs a decision about who may send it.
func TestMethodRights_EveryMethodHasARule(t *testing.T) {
	var methods []string
	for _, f := range []string{"../../schema/acp/meta.json", "../../schema/acp/meta.unstable.json", "../../schema/acp/sdk-2.4.0.meta.json", "../../schema/acp/sdk-2.4.0.meta.unstable.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			AgentMethods    map[string]string `json:"agentMethods"`
			ProtocolMethods map[string]string `json:"protocolMethods"`
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		for _, m := range meta.AgentMethods {
			methods = append(methods, m)
		}
		for _, m := range meta.ProtocolMethods {
			methods = append(methods, m)
		}
	}
	for _, catalogue := range []map[string]api.MethodInfo{api.Methods, api.ACPMethods} {
		for m, info := range catalogue {
			if info.Direction == "client→hub" {
				methods = append(methods, m)
			}
		}
	}
	for _, m := range methods {
		r, ok := api.MethodRights[m]
		if !ok {
			t.Errorf("method %s has no rule in the schema's x-acphub-rights", m)
			continue
		}
		if !slices.Contains(Rights, Right(r)) {
			t.Errorf("method %s needs %q, which is no right of package auth", m, r)
		}
	}
	if got := MethodRight("_vendor/something"); got != Configure {
		t.Errorf("an extension method needs %s, want configure", got)
	}
}

// TestRoles_AsTheSchemaSays checks that each role has exactly the rights
// the schema lists for it.
func TestRoles_AsTheSchemaSays(t *testing.T) {
	var doc struct {
		Rights struct {
			Rights map[string]string   `json:"rights"`
			Roles  map[string][]string `json:"roles"`
		} `json:"x-acphub-rights"`
	}
	if err := json.Unmarshal(schema.API, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Rights.Rights) != len(Rights) {
		t.Errorf("the schema has %d rights, package auth %d", len(doc.Rights.Rights), len(Rights))
	}
	for _, r := range Rights {
		if doc.Rights.Rights[string(r)] == "" {
			t.Errorf("right %s is not described in the schema", r)
		}
	}
	if len(doc.Rights.Roles) != len(roleNames) {
		t.Errorf("the schema has %d roles, package auth %d", len(doc.Rights.Roles), len(roleNames))
	}
	for name, rights := range doc.Rights.Roles {
		role, err := ParseRole(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range Rights {
			if want := slices.Contains(rights, string(r)); role.Has(r) != want {
				t.Errorf("%s has %s: %t, the schema says %t", role, r, role.Has(r), want)
			}
		}
	}
}
