package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// object is a JSON object that remembers the order of its members, so the
// generated code follows the schema's order.
type object struct {
	keys []string
	m    map[string]any
}

func (o *object) get(k string) any {
	if o == nil {
		return nil
	}
	return o.m[k]
}

// set sets k to v, appending k to the keys when it is new.
func (o *object) set(k string, v any) {
	if _, ok := o.m[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.m[k] = v
}

// parseOrdered decodes JSON; objects become *object, numbers json.Number.
func parseOrdered(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("trailing data after the document")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{m: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := o.m[k]; dup {
					return nil, fmt.Errorf("member %q appears twice", k)
				}
				o.keys = append(o.keys, k)
				o.m[k] = v
			}
			_, err := dec.Token()
			return o, err
		case '[':
			var arr []any
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, err
		}
	}
	return tok, nil
}
