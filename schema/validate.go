package schema

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ValidateEvent checks b, one event as JSON, against the event schema,
// format assertions on ("uuid" and "date-time" are checked, not just noted
// as 2020-12 does by default): against the whole union when full is set,
// otherwise against the part for its type, which gives the same answer for
// less (see eventValidator).
func ValidateEvent(b []byte, full bool) error {
	v, err := events()
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if !full {
		m, _ := inst.(map[string]any)
		typ, _ := m["type"].(string)
		if sch := v.byType[typ]; sch != nil {
			return sch.Validate(inst)
		}
	}
	return v.full.Validate(inst)
}

// EventTypesByPart reports how many event types ValidateEvent checks by
// the part for their type alone.
func EventTypesByPart() (int, error) {
	v, err := events()
	return len(v.byType), err
}

// events is the event schema compiled once.
var events = sync.OnceValues(compileEvents)

// eventValidator validates events against the event schema.
//
// The schema is allOf [Envelope, oneOf [one definition per type]], and
// every definition requires "type" with its own const. So an event of type
// T is valid exactly when it is valid against allOf [Envelope, definition
// of T]: every other branch of the oneOf fails on its const. byType holds
// those schemas, which cost a quarter of the whole union. It is nil when
// the schema does not have that shape any more; then every event is
// validated against the whole schema, as it is when its type is unknown.
type eventValidator struct {
	full   *jsonschema.Schema
	byType map[string]*jsonschema.Schema
}

func compileEvents() (*eventValidator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Events))
	if err != nil {
		return nil, fmt.Errorf("parse the event schema: %w", err)
	}
	root, _ := doc.(map[string]any)
	id, _ := root["$id"].(string)
	if id == "" {
		return nil, errors.New("the event schema has no $id")
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(id, doc); err != nil {
		return nil, err
	}
	v := &eventValidator{}
	if v.full, err = c.Compile(id); err != nil {
		return nil, err
	}
	defs := typeDefinitions(root)
	if defs == nil {
		return v, nil
	}
	v.byType = map[string]*jsonschema.Schema{}
	for typ, def := range defs {
		loc := "mem:///acphub/" + typ + ".schema.json"
		if err := c.AddResource(loc, map[string]any{
			"$schema": root["$schema"],
			"allOf":   []any{map[string]any{"$ref": id + "#/$defs/Envelope"}, map[string]any{"$ref": id + "#/$defs/" + def}},
		}); err != nil {
			return nil, err
		}
		if v.byType[typ], err = c.Compile(loc); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// typeDefinitions returns the name of the definition of each event type
// when the schema root is exactly allOf [{$ref Envelope}, {oneOf [{$ref
// D}…]}] (besides annotations), and each D requires "type" with a const of
// its own; otherwise nil.
func typeDefinitions(root map[string]any) map[string]string {
	for k := range root {
		switch {
		case k == "allOf", k == "$defs", k == "$schema", k == "$id", k == "title", k == "description", strings.HasPrefix(k, "x-"):
		default:
			return nil
		}
	}
	defs, _ := root["$defs"].(map[string]any)
	ref := func(v any) string {
		m, _ := v.(map[string]any)
		r, _ := m["$ref"].(string)
		if len(m) != 1 || !strings.HasPrefix(r, "#/$defs/") {
			return ""
		}
		return strings.TrimPrefix(r, "#/$defs/")
	}
	all, _ := root["allOf"].([]any)
	if len(all) != 2 || ref(all[0]) != "Envelope" {
		return nil
	}
	union, _ := all[1].(map[string]any)
	branches, _ := union["oneOf"].([]any)
	if len(union) != 1 || len(branches) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, b := range branches {
		name := ref(b)
		def, _ := defs[name].(map[string]any)
		props, _ := def["properties"].(map[string]any)
		typeProp, _ := props["type"].(map[string]any)
		typ, _ := typeProp["const"].(string)
		required, _ := def["required"].([]any)
		if name == "" || typ == "" || out[typ] != "" || !slices.Contains(required, any("type")) {
			return nil
		}
		out[typ] = name
	}
	return out
}
