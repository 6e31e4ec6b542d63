package mcpclient

import (
	"encoding/json"
	"fmt"
)

// setMeta sets keys of params._meta, keeping the other params and _meta keys.
func setMeta(params json.RawMessage, set map[string]json.RawMessage) (json.RawMessage, error) {
	fields, err := paramFields(params)
	if err != nil {
		return nil, err
	}
	meta := map[string]json.RawMessage{}
	if m, ok := fields["_meta"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, fmt.Errorf("params._meta must be a JSON object: %w", err)
		}
	}
	for k, v := range set {
		meta[k] = v
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	fields["_meta"] = m
	return json.Marshal(fields)
}

// setParams sets top-level keys of params; a nil value removes its key.
func setParams(params json.RawMessage, set map[string]json.RawMessage) (json.RawMessage, error) {
	fields, err := paramFields(params)
	if err != nil {
		return nil, err
	}
	for k, v := range set {
		if v == nil {
			delete(fields, k)
		} else {
			fields[k] = v
		}
	}
	return json.Marshal(fields)
}

func paramFields(params json.RawMessage) (map[string]json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &fields); err != nil {
			return nil, fmt.Errorf("params must be a JSON object: %w", err)
		}
	}
	return fields, nil
}
