package tracefile

// The OTLP trace schema as both transcoders walk it: ExportTraceServiceRequest and every message
// under it, each field with its protobuf number and type and its OTLP/JSON names, in the order
// OTLP/JSON writes them. The JSON reader (jsonwire.go) looks fields up by name, the JSON writer
// (otlpjson_wire.go) takes them in order; neither has a walk of its own per message.

type pbKind uint8

const (
	pbMessage pbKind = iota
	pbString
	pbHexID
	pbBase64
	pbFixed64
	pbFixed32
	pbUint32
	pbEnum
	pbInt64
	pbInt32
	pbDouble
	pbBool
)

type pbField struct {
	name     string // lowerCamelCase, as OTLP/JSON writes it
	num      uint32
	kind     pbKind
	repeated bool
	// oneof fields are written even when zero: presence is their meaning. always ones are
	// written even when absent (a KeyValue's key; a span's status, as the file exporter does).
	oneof, always bool
	msg           *pbMessageDesc
	enum          map[string]int32
}

type pbMessageDesc struct {
	fields map[string]*pbField // by either name, for the JSON reader
	order  []*pbField          // in the order OTLP/JSON writes them
}

// def adds a field under its lowerCamelCase and proto names; fields are written in the order they
// are added.
func (m *pbMessageDesc) def(camel, snake string, f *pbField) *pbMessageDesc {
	if m.fields == nil {
		m.fields = map[string]*pbField{}
	}
	f.name = camel
	m.fields[camel] = f
	if snake != "" {
		m.fields[snake] = f
	}
	m.order = append(m.order, f)
	return m
}

var (
	spanKindNames = map[string]int32{"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
		"SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
	statusCodeNames = map[string]int32{"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
)

// otlpRequestDesc describes ExportTraceServiceRequest. It is built once and only read.
var otlpRequestDesc = func() *pbMessageDesc {
	anyValue := &pbMessageDesc{}
	keyValue := &pbMessageDesc{}
	arrayValue := (&pbMessageDesc{}).def("values", "", &pbField{num: 1, kind: pbMessage, repeated: true, msg: anyValue})
	kvList := (&pbMessageDesc{}).def("values", "", &pbField{num: 1, kind: pbMessage, repeated: true, msg: keyValue})
	anyValue.
		def("stringValue", "string_value", &pbField{num: 1, kind: pbString, oneof: true}).
		def("boolValue", "bool_value", &pbField{num: 2, kind: pbBool, oneof: true}).
		def("intValue", "int_value", &pbField{num: 3, kind: pbInt64, oneof: true}).
		def("doubleValue", "double_value", &pbField{num: 4, kind: pbDouble, oneof: true}).
		def("arrayValue", "array_value", &pbField{num: 5, kind: pbMessage, msg: arrayValue, oneof: true}).
		def("kvlistValue", "kvlist_value", &pbField{num: 6, kind: pbMessage, msg: kvList, oneof: true}).
		def("bytesValue", "bytes_value", &pbField{num: 7, kind: pbBase64, oneof: true}).
		def("stringValueStrindex", "string_value_strindex", &pbField{num: 8, kind: pbInt32, oneof: true})
	keyValue.
		def("key", "", &pbField{num: 1, kind: pbString, always: true}).
		def("keyStrindex", "key_strindex", &pbField{num: 3, kind: pbInt32}).
		def("value", "", &pbField{num: 2, kind: pbMessage, msg: anyValue})
	attrs := &pbField{num: 0, kind: pbMessage, repeated: true, msg: keyValue}
	withNum := func(f *pbField, n uint32) *pbField { c := *f; c.num = n; return &c }
	dropped := func(n uint32) *pbField { return &pbField{num: n, kind: pbUint32} }
	entityRef := (&pbMessageDesc{}).
		def("schemaUrl", "schema_url", &pbField{num: 1, kind: pbString}).
		def("type", "", &pbField{num: 2, kind: pbString}).
		def("idKeys", "id_keys", &pbField{num: 3, kind: pbString, repeated: true}).
		def("descriptionKeys", "description_keys", &pbField{num: 4, kind: pbString, repeated: true})
	resource := (&pbMessageDesc{}).
		def("attributes", "", withNum(attrs, 1)).
		def("droppedAttributesCount", "dropped_attributes_count", dropped(2)).
		def("entityRefs", "entity_refs", &pbField{num: 3, kind: pbMessage, repeated: true, msg: entityRef})
	scope := (&pbMessageDesc{}).
		def("name", "", &pbField{num: 1, kind: pbString}).
		def("version", "", &pbField{num: 2, kind: pbString}).
		def("attributes", "", withNum(attrs, 3)).
		def("droppedAttributesCount", "dropped_attributes_count", dropped(4))
	event := (&pbMessageDesc{}).
		def("timeUnixNano", "time_unix_nano", &pbField{num: 1, kind: pbFixed64}).
		def("name", "", &pbField{num: 2, kind: pbString}).
		def("attributes", "", withNum(attrs, 3)).
		def("droppedAttributesCount", "dropped_attributes_count", dropped(4))
	link := (&pbMessageDesc{}).
		def("traceId", "trace_id", &pbField{num: 1, kind: pbHexID}).
		def("spanId", "span_id", &pbField{num: 2, kind: pbHexID}).
		def("traceState", "trace_state", &pbField{num: 3, kind: pbString}).
		def("attributes", "", withNum(attrs, 4)).
		def("droppedAttributesCount", "dropped_attributes_count", dropped(5)).
		def("flags", "", &pbField{num: 6, kind: pbFixed32})
	status := (&pbMessageDesc{}).
		def("message", "", &pbField{num: 2, kind: pbString}).
		def("code", "", &pbField{num: 3, kind: pbEnum, enum: statusCodeNames})
	span := (&pbMessageDesc{}).
		def("traceId", "trace_id", &pbField{num: 1, kind: pbHexID}).
		def("spanId", "span_id", &pbField{num: 2, kind: pbHexID}).
		def("traceState", "trace_state", &pbField{num: 3, kind: pbString}).
		def("parentSpanId", "parent_span_id", &pbField{num: 4, kind: pbHexID}).
		def("flags", "", &pbField{num: 16, kind: pbFixed32}).
		def("name", "", &pbField{num: 5, kind: pbString}).
		def("kind", "", &pbField{num: 6, kind: pbEnum, enum: spanKindNames}).
		def("startTimeUnixNano", "start_time_unix_nano", &pbField{num: 7, kind: pbFixed64}).
		def("endTimeUnixNano", "end_time_unix_nano", &pbField{num: 8, kind: pbFixed64}).
		def("attributes", "", withNum(attrs, 9)).
		def("droppedAttributesCount", "dropped_attributes_count", dropped(10)).
		def("events", "", &pbField{num: 11, kind: pbMessage, repeated: true, msg: event}).
		def("droppedEventsCount", "dropped_events_count", dropped(12)).
		def("links", "", &pbField{num: 13, kind: pbMessage, repeated: true, msg: link}).
		def("droppedLinksCount", "dropped_links_count", dropped(14)).
		def("status", "", &pbField{num: 15, kind: pbMessage, msg: status, always: true})
	scopeSpans := (&pbMessageDesc{}).
		def("scope", "", &pbField{num: 1, kind: pbMessage, msg: scope}).
		def("spans", "", &pbField{num: 2, kind: pbMessage, repeated: true, msg: span}).
		def("schemaUrl", "schema_url", &pbField{num: 3, kind: pbString})
	resourceSpans := (&pbMessageDesc{}).
		def("resource", "", &pbField{num: 1, kind: pbMessage, msg: resource}).
		def("scopeSpans", "scope_spans", &pbField{num: 2, kind: pbMessage, repeated: true, msg: scopeSpans}).
		def("schemaUrl", "schema_url", &pbField{num: 3, kind: pbString})
	return (&pbMessageDesc{}).
		def("resourceSpans", "resource_spans", &pbField{num: 1, kind: pbMessage, repeated: true, msg: resourceSpans})
}()
