/**
 * The shape every generated dashboard must have, built from Grafana's own types
 * (@grafana/schema, the TypeScript generated from Grafana's CUE dashboard kind and
 * panel plugin schemas).
 *
 * `python -m dashboards.typecheck` embeds each dashboards/*.json file as an object
 * literal typed `RagmonDashboard` and runs `tsc --noEmit`. Object literals (rather
 * than `import x from './x.json'`) keep string literals narrow, so enum fields
 * ("absolute", "line", "query") are checked, and excess-property checks catch a
 * misspelt field anywhere in the document.
 *
 * Where @grafana/schema is deliberately open (a panel's `options` and `targets` are
 * `Record<string, unknown>` because they belong to plugins) this file narrows them
 * to the plugin's own published types: the timeseries, stat, bargauge and table
 * panel configs, and Prometheus queries.
 */
import type * as common from '@grafana/schema';
import type {
  AnnotationQuery,
  Dashboard,
  DataSourceRef,
  FieldConfig,
  FieldConfigSource,
  GridPos,
  Panel,
  RowPanel,
  VariableModel,
} from '@grafana/schema';
import type { Options as BarGaugeOptions } from '@grafana/schema/dist/esm/raw/composable/bargauge/panelcfg/x/BarGaugePanelCfg_types.gen';
import type { Options as StatOptions } from '@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen';
import type {
  FieldConfig as TableFieldConfig,
  Options as TableOptions,
} from '@grafana/schema/dist/esm/raw/composable/table/panelcfg/x/TablePanelCfg_types.gen';
import type {
  FieldConfig as TimeSeriesFieldConfig,
  Options as TimeSeriesOptions,
} from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen';

/** How a TypeScript type reads in a JSON document: a string enum member is written as its value. */
export type Json<T> = T extends string
  ? string extends T
    ? string
    : `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends readonly unknown[]
      ? { [K in keyof T]: Json<T[K]> }
      : T extends object
        ? { [K in keyof T]: Json<T[K]> }
        : T;

/**
 * The stored part of Grafana's Prometheus query model (PromQuery lives in the
 * @grafana/prometheus package, not in @grafana/schema): schema's DataQuery plus the
 * Prometheus fields a dashboard keeps.
 */
export interface PromQuery extends common.DataQuery {
  datasource: DataSourceRef;
  expr: string;
  legendFormat?: string;
  instant?: boolean;
  range?: boolean;
  format?: 'time_series' | 'table' | 'heatmap';
  editorMode?: 'code' | 'builder';
  interval?: string;
}

/** Prometheus' annotation fields that Grafana keeps beside the generic annotation query. */
export interface PromAnnotation extends Omit<AnnotationQuery<PromQuery>, 'datasource' | 'target'> {
  datasource: DataSourceRef;
  target: PromQuery;
  titleFormat?: string;
  textFormat?: string;
  tagKeys?: string;
  useValueForTime?: boolean;
}

interface FieldConfigOf<Custom> {
  defaults: Omit<FieldConfig, 'custom'> & { custom?: Custom };
  overrides: FieldConfigSource['overrides'];
}

/** A panel whose plugin, query model and options are all typed; at least one target. */
type PanelOf<Type extends string, Options, Custom> = Omit<
  Panel,
  'type' | 'id' | 'title' | 'gridPos' | 'datasource' | 'targets' | 'options' | 'fieldConfig'
> & {
  type: Type;
  id: number;
  title: string;
  gridPos: GridPos;
  datasource: DataSourceRef;
  targets: [PromQuery, ...PromQuery[]];
  options: Options;
  fieldConfig: FieldConfigOf<Custom>;
};

export type RagmonPanel =
  | PanelOf<'timeseries', TimeSeriesOptions, TimeSeriesFieldConfig>
  | PanelOf<'stat', StatOptions, never>
  | PanelOf<'bargauge', BarGaugeOptions, never>
  | PanelOf<'table', TableOptions, TableFieldConfig>;

export type RagmonRow = Omit<RowPanel, 'panels' | 'gridPos' | 'title'> & {
  gridPos: GridPos;
  title: string;
  panels: [];
};

export type RagmonDashboard = Json<
  Omit<Dashboard, 'uid' | 'title' | 'panels' | 'annotations' | 'templating'> & {
    uid: string;
    title: string;
    panels: Array<RagmonPanel | RagmonRow>;
    annotations: { list: PromAnnotation[] };
    templating: { list: VariableModel[] };
  }
>;
