package main

import (
	"errors"
	"fmt"
	"strings"
)

// eventType is one member of the session-event union.
type eventType struct {
	name      string // Go type of its data
	typ       string // the "type" value
	ephemeral bool
	stability string
}

// genEvents writes the envelope, one data type per event type, and the
// registry that decodes data by type with a raw fallback.
func genEvents(doc *object, source string, done map[string]*object) ([]byte, error) {
	g, err := newGen(doc, done)
	if err != nil {
		return nil, err
	}
	union, err := unionMembers(doc)
	if err != nil {
		return nil, err
	}
	_, env, err := g.def("#/$defs/Envelope")
	if err != nil {
		return nil, err
	}
	if err := g.structType("Event", env); err != nil {
		return nil, err
	}
	var events []eventType
	for _, ref := range union {
		name, d, err := g.def(ref)
		if err != nil {
			return nil, err
		}
		ev, err := readEventType(g, name, d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		events = append(events, ev)
	}
	g.printf("// Session event types.\nconst (\n")
	for _, ev := range events {
		g.printf("\tEvent%s = %q\n", ev.name, ev.typ)
	}
	g.printf(")\n\n")
	for _, ev := range events {
		g.printf("// EventType implements EventData.\nfunc (*%s) EventType() string { return Event%s }\n\n", ev.name, ev.name)
	}
	g.printf("var eventTypes = map[string]eventInfo{\n")
	for _, ev := range events {
		g.printf("\tEvent%s: {ephemeral: %v, stability: %q, new: func() EventData { return new(%s) }},\n",
			ev.name, ev.ephemeral, ev.stability, ev.name)
	}
	g.printf("}\n")
	return g.file(source)
}

// unionMembers returns the $refs of allOf[1].oneOf: the event types.
func unionMembers(doc *object) ([]string, error) {
	all, ok := doc.get("allOf").([]any)
	if !ok || len(all) != 2 {
		return nil, errors.New("want allOf: [envelope, {oneOf: events}]")
	}
	second, _ := all[1].(*object)
	members, ok := second.get("oneOf").([]any)
	if !ok {
		return nil, errors.New("allOf[1] has no oneOf")
	}
	var refs []string
	for _, m := range members {
		ref, ok := m.(*object).get("$ref").(string)
		if !ok {
			return nil, errors.New("oneOf member without $ref")
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

func readEventType(g *gen, name string, d *object) (eventType, error) {
	props, ok := d.get("properties").(*object)
	if !ok {
		return eventType{}, errors.New("no properties")
	}
	typ, ok := props.get("type").(*object).get("const").(string)
	if !ok || typ == "" {
		return eventType{}, errors.New("properties.type has no const")
	}
	dataRef, ok := props.get("data").(*object).get("$ref").(string)
	if !ok {
		return eventType{}, errors.New("properties.data has no $ref")
	}
	dataName, data, err := g.def(dataRef)
	if err != nil {
		return eventType{}, err
	}
	if dataName != name+"Data" {
		return eventType{}, fmt.Errorf("data definition %s, want %sData", dataName, name)
	}
	// The data type takes the event's name: api.SessionCreated.
	if desc, ok := d.get("description").(string); ok {
		data.set("description", strings.TrimSuffix(desc, ".")+".")
	}
	if err := g.structType(name, data); err != nil {
		return eventType{}, err
	}
	stability, _ := d.get("x-acphub-stability").(string)
	if stability == "" {
		return eventType{}, errors.New("no x-acphub-stability")
	}
	ephemeral, _ := d.get("x-acphub-ephemeral").(bool)
	return eventType{name: name, typ: typ, ephemeral: ephemeral, stability: stability}, nil
}
