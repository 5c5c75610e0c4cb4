// Package otlpschema is the OTLP trace schema as the project's OTLP/JSON walkers read it:
// ExportTraceServiceRequest and every message under it, each field with its protobuf number and
// type, its OTLP/JSON names, and how the span decoder treats it. The JSON reader (spans' JSON to
// protobuf transcoder) looks fields up by name, the JSON writer (tracefile's protobuf to JSON
// transcoder) takes them in order; neither has a walk of its own per message.
package otlpschema

// Kind is a field's protobuf type, as the transcoders convert it.
type Kind uint8

const (
	KindMessage Kind = iota
	KindString
	KindHexID  // bytes, written in OTLP/JSON as hex: trace and span ids
	KindBase64 // bytes, written as base64
	KindFixed64
	KindFixed32
	KindUint32
	KindEnum
	KindInt64
	KindInt32
	KindDouble
	KindBool
)

// Join is how the span decoder (spans.DecodeJSON) takes a member name that occurs again in one
// JSON object, and null.
type Join uint8

const (
	// Replace: the later occurrence replaces the earlier one; null clears the field, except for an
	// enum or a timestamp (KindEnum, KindFixed64), which null leaves as it was.
	Replace Join = iota
	// Append: the later array is added to the earlier one (the request's resource spans, a
	// ScopeSpans' spans, an array's or a map's values); null adds nothing.
	Append
	// Merge: a message whose members are taken one by one, each by its own rule (a status, a
	// scope); null adds nothing.
	Merge
	// ResourceAttrs: a resource's attributes; the later array replaces the earlier one's
	// attributes except the service name and instance, which are kept until replaced.
	ResourceAttrs
	// Checked: read for the nesting limit alone, not kept (a scope's attributes).
	Checked
)

// Field is one field of a message.
type Field struct {
	Name     string // lowerCamelCase, as OTLP/JSON writes it
	Num      uint32
	Kind     Kind
	Repeated bool
	// Oneof fields are written even when zero: presence is their meaning. Always ones are
	// written even when absent (a KeyValue's key; a span's status, as the file exporter does).
	Oneof, Always bool
	Msg           *Message
	EnumNames     []string         // by number
	EnumValues    map[string]int32 // by name
	// Decoded says the span decoder reads the field (other fields it skips as unknown), Join how.
	Decoded bool
	Join    Join
	Index   int // in its message's Order
}

// Message is one message type.
type Message struct {
	// byLen is the fields by the length of either name, for the JSON reader: one or two names of
	// a length, compared without hashing the name.
	byLen [maxName + 1][]named
	Order []*Field // in the order OTLP/JSON writes them
}

type named struct {
	name string
	f    *Field
}

const maxName = 24 // dropped_attributes_count

// Field returns the field named name (lowerCamelCase or the proto name), nil if there is none.
func (m *Message) Field(name []byte) *Field {
	if len(name) > maxName {
		return nil
	}
	for _, n := range m.byLen[len(name)] {
		if n.name == string(name) {
			return n.f
		}
	}
	return nil
}

// def adds a field under its lowerCamelCase and proto names; fields are written in the order they
// are added.
func (m *Message) def(camel, snake string, f *Field) *Message {
	f.Name, f.Index = camel, len(m.Order)
	if f.EnumNames != nil {
		f.EnumValues = map[string]int32{}
		for i, n := range f.EnumNames {
			f.EnumValues[n] = int32(i)
		}
	}
	m.byLen[len(camel)] = append(m.byLen[len(camel)], named{camel, f})
	if snake != "" {
		m.byLen[len(snake)] = append(m.byLen[len(snake)], named{snake, f})
	}
	m.Order = append(m.Order, f)
	return m
}

// Messages of the schema the span decoder treats apart: an attribute's KeyValue (kept or dropped
// by its key) and AnyValue (one member, nesting bounded).
var (
	KeyValue = &Message{}
	AnyValue = &Message{}
)

// Request describes ExportTraceServiceRequest. It is built once and only read.
var Request = func() *Message {
	spanKinds := []string{"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"}
	statusCodes := []string{"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"}
	arrayValue := (&Message{}).def("values", "", &Field{Num: 1, Kind: KindMessage, Repeated: true, Msg: AnyValue, Decoded: true, Join: Append})
	kvList := (&Message{}).def("values", "", &Field{Num: 1, Kind: KindMessage, Repeated: true, Msg: KeyValue, Decoded: true, Join: Append})
	AnyValue.
		def("stringValue", "string_value", &Field{Num: 1, Kind: KindString, Oneof: true, Decoded: true}).
		def("boolValue", "bool_value", &Field{Num: 2, Kind: KindBool, Oneof: true, Decoded: true}).
		def("intValue", "int_value", &Field{Num: 3, Kind: KindInt64, Oneof: true, Decoded: true}).
		def("doubleValue", "double_value", &Field{Num: 4, Kind: KindDouble, Oneof: true, Decoded: true}).
		def("arrayValue", "array_value", &Field{Num: 5, Kind: KindMessage, Msg: arrayValue, Oneof: true, Decoded: true}).
		def("kvlistValue", "kvlist_value", &Field{Num: 6, Kind: KindMessage, Msg: kvList, Oneof: true, Decoded: true}).
		def("bytesValue", "bytes_value", &Field{Num: 7, Kind: KindBase64, Oneof: true, Decoded: true}).
		def("stringValueStrindex", "string_value_strindex", &Field{Num: 8, Kind: KindInt32, Oneof: true})
	KeyValue.
		def("key", "", &Field{Num: 1, Kind: KindString, Always: true, Decoded: true}).
		def("keyStrindex", "key_strindex", &Field{Num: 3, Kind: KindInt32}).
		def("value", "", &Field{Num: 2, Kind: KindMessage, Msg: AnyValue, Decoded: true})
	attrs := func(n uint32) *Field {
		return &Field{Num: n, Kind: KindMessage, Repeated: true, Msg: KeyValue, Decoded: true}
	}
	dropped := func(n uint32) *Field { return &Field{Num: n, Kind: KindUint32} }
	entityRef := (&Message{}).
		def("schemaUrl", "schema_url", &Field{Num: 1, Kind: KindString}).
		def("type", "", &Field{Num: 2, Kind: KindString}).
		def("idKeys", "id_keys", &Field{Num: 3, Kind: KindString, Repeated: true}).
		def("descriptionKeys", "description_keys", &Field{Num: 4, Kind: KindString, Repeated: true})
	resourceAttrs := attrs(1)
	resourceAttrs.Join = ResourceAttrs
	resource := (&Message{}).
		def("attributes", "", resourceAttrs).
		def("droppedAttributesCount", "dropped_attributes_count", dropped(2)).
		def("entityRefs", "entity_refs", &Field{Num: 3, Kind: KindMessage, Repeated: true, Msg: entityRef})
	scopeAttrs := attrs(3)
	scopeAttrs.Join = Checked
	scope := (&Message{}).
		def("name", "", &Field{Num: 1, Kind: KindString, Decoded: true}).
		def("version", "", &Field{Num: 2, Kind: KindString}).
		def("attributes", "", scopeAttrs).
		def("droppedAttributesCount", "dropped_attributes_count", dropped(4))
	event := (&Message{}).
		def("timeUnixNano", "time_unix_nano", &Field{Num: 1, Kind: KindFixed64, Decoded: true}).
		def("name", "", &Field{Num: 2, Kind: KindString, Decoded: true}).
		def("attributes", "", attrs(3)).
		def("droppedAttributesCount", "dropped_attributes_count", dropped(4))
	link := (&Message{}).
		def("traceId", "trace_id", &Field{Num: 1, Kind: KindHexID, Decoded: true}).
		def("spanId", "span_id", &Field{Num: 2, Kind: KindHexID, Decoded: true}).
		def("traceState", "trace_state", &Field{Num: 3, Kind: KindString}).
		def("attributes", "", attrs(4)).
		def("droppedAttributesCount", "dropped_attributes_count", dropped(5)).
		def("flags", "", &Field{Num: 6, Kind: KindFixed32})
	status := (&Message{}).
		def("message", "", &Field{Num: 2, Kind: KindString, Decoded: true}).
		def("code", "", &Field{Num: 3, Kind: KindEnum, EnumNames: statusCodes, Decoded: true})
	span := (&Message{}).
		def("traceId", "trace_id", &Field{Num: 1, Kind: KindHexID, Decoded: true}).
		def("spanId", "span_id", &Field{Num: 2, Kind: KindHexID, Decoded: true}).
		def("traceState", "trace_state", &Field{Num: 3, Kind: KindString, Decoded: true}).
		def("parentSpanId", "parent_span_id", &Field{Num: 4, Kind: KindHexID, Decoded: true}).
		def("flags", "", &Field{Num: 16, Kind: KindFixed32}).
		def("name", "", &Field{Num: 5, Kind: KindString, Decoded: true}).
		def("kind", "", &Field{Num: 6, Kind: KindEnum, EnumNames: spanKinds, Decoded: true}).
		def("startTimeUnixNano", "start_time_unix_nano", &Field{Num: 7, Kind: KindFixed64, Decoded: true}).
		def("endTimeUnixNano", "end_time_unix_nano", &Field{Num: 8, Kind: KindFixed64, Decoded: true}).
		def("attributes", "", attrs(9)).
		def("droppedAttributesCount", "dropped_attributes_count", dropped(10)).
		def("events", "", &Field{Num: 11, Kind: KindMessage, Repeated: true, Msg: event, Decoded: true}).
		def("droppedEventsCount", "dropped_events_count", dropped(12)).
		def("links", "", &Field{Num: 13, Kind: KindMessage, Repeated: true, Msg: link, Decoded: true}).
		def("droppedLinksCount", "dropped_links_count", dropped(14)).
		def("status", "", &Field{Num: 15, Kind: KindMessage, Msg: status, Always: true, Decoded: true, Join: Merge})
	scopeSpans := (&Message{}).
		def("scope", "", &Field{Num: 1, Kind: KindMessage, Msg: scope, Decoded: true, Join: Merge}).
		def("spans", "", &Field{Num: 2, Kind: KindMessage, Repeated: true, Msg: span, Decoded: true, Join: Append}).
		def("schemaUrl", "schema_url", &Field{Num: 3, Kind: KindString})
	resourceSpans := (&Message{}).
		def("resource", "", &Field{Num: 1, Kind: KindMessage, Msg: resource, Decoded: true, Join: Merge}).
		def("scopeSpans", "scope_spans", &Field{Num: 2, Kind: KindMessage, Repeated: true, Msg: scopeSpans, Decoded: true, Join: Append}).
		def("schemaUrl", "schema_url", &Field{Num: 3, Kind: KindString})
	return (&Message{}).
		def("resourceSpans", "resource_spans", &Field{Num: 1, Kind: KindMessage, Repeated: true, Msg: resourceSpans, Decoded: true, Join: Append})
}()
