package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// genAPI writes method constants and their payload types, the method and
// error catalogues, and the types of the HTTP payloads.
func genAPI(doc *object, source string, done map[string]*object) ([]byte, error) {
	g, err := newGen(doc, done)
	if err != nil {
		return nil, err
	}
	for _, cat := range []struct{ key, what, name string }{
		{"x-acphub-methods", "acphub defines", "Methods"},
		{"x-acphub-acp-methods", "of ACP a client uses through acphub", "ACPMethods"},
	} {
		methods, ok := doc.get(cat.key).(*object)
		if !ok {
			return nil, fmt.Errorf("no %s", cat.key)
		}
		var consts, infos strings.Builder
		for _, name := range methods.keys {
			m := methods.get(name).(*object)
			ident := methodConst(name)
			fmt.Fprintf(&consts, "\t%s = %q\n", ident, name)
			for _, part := range []string{"params", "result"} {
				if s, ok := m.get(part).(*object); ok {
					if _, err := g.goType(s, ""); err != nil {
						return nil, fmt.Errorf("method %s %s: %w", name, part, err)
					}
				}
			}
			fmt.Fprintf(&infos, "\t%s: {Kind: %q, Direction: %q, Stability: %q, Scope: %q, Operation: %t},\n",
				ident, str(m, "kind"), str(m, "direction"), str(m, "stability"), scope(m), m.get("operation") == true)
		}
		g.printf("// Methods %s.\nconst (\n%s)\n\n", cat.what, consts.String())
		g.printf("// %s describes each method %s.\nvar %s = map[string]MethodInfo{\n%s}\n\n", cat.name, cat.what, cat.name, infos.String())
	}

	if err := genRights(g, doc); err != nil {
		return nil, err
	}
	if err := genHTTP(g, doc); err != nil {
		return nil, err
	}
	// Every other definition is part of the API too.
	for _, name := range g.defs.keys {
		if d := g.defs.get(name).(*object); !isRaw(d) {
			if err := g.structType(name, d); err != nil {
				return nil, err
			}
		}
	}
	if err := genErrors(g, doc); err != nil {
		return nil, err
	}
	return g.file(source)
}

// genRights emits the right each method needs (x-acphub-rights).
func genRights(g *gen, doc *object) error {
	r, ok := doc.get("x-acphub-rights").(*object)
	if !ok {
		return errors.New("no x-acphub-rights")
	}
	rights, _ := r.get("rights").(*object)
	methods, _ := r.get("methods").(*object)
	def := str(r, "default")
	if rights == nil || methods == nil || rights.get(def) == nil {
		return errors.New("x-acphub-rights needs rights, methods and a default among the rights")
	}
	var b strings.Builder
	for _, name := range methods.keys {
		right, _ := methods.get(name).(string)
		if rights.get(right) == nil {
			return fmt.Errorf("x-acphub-rights: method %s needs %q, which is not a right", name, right)
		}
		fmt.Fprintf(&b, "\t%q: %q,\n", name, right)
	}
	g.printf("// DefaultRight is the right a method MethodRights does not list needs.\nconst DefaultRight = %q\n\n", def)
	g.printf("// MethodRights is the right a client's role needs for each method it\n// sends (docs/roles.md).\nvar MethodRights = map[string]string{\n%s}\n\n", b.String())
	return nil
}

// methodConst is the name of a method's constant in package api.
func methodConst(name string) string {
	return "Method" + exported(strings.TrimPrefix(name, "_acphub/"))
}

// scope is "session" for a method that acts on the session the client is
// in (its params' sessionId is that session's), else "connection".
func scope(m *object) string {
	if str(m, "scope") == "session" {
		return "session"
	}
	return "connection"
}

func str(o *object, k string) string {
	s, _ := o.get(k).(string)
	return s
}

// genHTTP emits the payload types of the HTTP endpoints.
func genHTTP(g *gen, doc *object) error {
	http, ok := doc.get("x-acphub-http").(*object)
	if !ok {
		return errors.New("no x-acphub-http")
	}
	for _, ep := range http.keys {
		e := http.get(ep).(*object)
		for _, part := range []string{"request", "response", "item"} {
			if s, ok := e.get(part).(*object); ok {
				if _, err := g.goType(s, ""); err != nil {
					return fmt.Errorf("%s %s: %w", ep, part, err)
				}
			}
		}
	}
	return nil
}

// genErrors emits a Code constant for each of acphub's own codes, a Reason
// constant for each reason, JSON-RPC's and HTTP's, and the two catalogues.
func genErrors(g *gen, doc *object) error {
	list, ok := doc.get("x-acphub-errors").([]any)
	if !ok {
		return errors.New("no x-acphub-errors")
	}
	codes := map[int64]string{}
	reasons := map[string]bool{}
	var catalogue strings.Builder
	for _, item := range list {
		e, code, reason, err := catalogueEntry(item, "code")
		if err != nil {
			return err
		}
		if reasons[reason] && code >= -32099 && code <= -32010 {
			return fmt.Errorf("reason %q used twice", reason)
		}
		reasons[reason] = true
		if code >= -32099 && code <= -32010 {
			if prev, dup := codes[code]; dup {
				return fmt.Errorf("code %d used by %q and %q", code, prev, reason)
			}
			codes[code] = reason
		}
		fmt.Fprintf(&catalogue, "\t{Code: %d, Reason: %q, Message: %q, Description: %q, Condition: %q, Retryable: %t},\n",
			code, reason, str(e, "message"), str(e, "description"), str(e, "condition"), e.get("retryable") == true)
	}
	httpList, ok := doc.get("x-acphub-http-errors").([]any)
	if !ok {
		return errors.New("no x-acphub-http-errors")
	}
	var httpCatalogue strings.Builder
	httpReasons := map[string]bool{}
	for _, item := range httpList {
		e, status, reason, err := catalogueEntry(item, "status")
		if err != nil {
			return err
		}
		if httpReasons[reason] {
			return fmt.Errorf("HTTP reason %q used twice", reason)
		}
		httpReasons[reason], reasons[reason] = true, true
		fmt.Fprintf(&httpCatalogue, "\t{Status: %d, Reason: %q, Description: %q, Condition: %q, Retryable: %t},\n",
			status, reason, str(e, "description"), str(e, "condition"), e.get("retryable") == true)
	}
	var ids []int64
	for c := range codes {
		ids = append(ids, c)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] > ids[j] })
	g.printf("// acphub's own error codes, in the range -32010…-32099.\nconst (\n")
	for _, c := range ids {
		g.printf("\tCode%s = %d\n", exported(codes[c]), c)
	}
	g.printf(")\n\n")
	var names []string
	for r := range reasons {
		names = append(names, r)
	}
	sort.Strings(names)
	g.printf("// Values of data.reason in acphub's errors.\nconst (\n")
	for _, r := range names {
		g.printf("\tReason%s = %q\n", exported(r), r)
	}
	g.printf(")\n\n")
	g.printf("// Errors lists every error acphub sends, with its code and reason.\nvar Errors = []ErrorInfo{\n%s}\n\n", catalogue.String())
	g.printf("// HTTPErrors lists every refusal of an HTTP request, with its status and\n// reason.\nvar HTTPErrors = []HTTPErrorInfo{\n%s}\n", httpCatalogue.String())
	return nil
}

// catalogueEntry reads an entry of an error list: its number under key
// (a JSON-RPC code or an HTTP status) and its reason.
func catalogueEntry(item any, key string) (*object, int64, string, error) {
	e, ok := item.(*object)
	if !ok {
		return nil, 0, "", errors.New("an error entry that is not an object")
	}
	n, ok := e.get(key).(json.Number)
	if !ok {
		return nil, 0, "", fmt.Errorf("error without a numeric %s", key)
	}
	num, err := n.Int64()
	if err != nil {
		return nil, 0, "", err
	}
	reason := str(e, "reason")
	if reason == "" {
		return nil, 0, "", fmt.Errorf("error %d without a reason", num)
	}
	return e, num, reason, nil
}
