// Reads a JSON list of prometheus-operator objects on stdin and validates each against the operator's CRD
// schema (the @kubernetes-models/prometheus-operator models, generated from those CRDs). Prints one JSON
// line per object: {"kind", "name", "error"} with error null when the object is valid. Exit 0 either way;
// an unknown kind is an error.
import { PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";
import { PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";

const MODELS = { PodMonitor, ServiceMonitor, PrometheusRule };
let input = "";
for await (const chunk of process.stdin) input += chunk;
for (const object of JSON.parse(input)) {
  const Model = MODELS[object.kind];
  let error = Model ? null : `no schema for kind ${object.kind}`;
  if (Model) {
    try {
      new Model(object).validate();
    } catch (exc) {
      error = exc.message;
    }
  }
  console.log(JSON.stringify({ kind: object.kind, name: object.metadata?.name ?? null, error }));
}
