"use strict";(self.rspackChunknbdist_panel=self.rspackChunknbdist_panel||[]).push([[429],{475(t,e,n){var r=n(601),i=n.n(r),o=n(314),a=(n.n(o))()(i());a.push([t.id,`.nbdist-panel {
  /* The views adapt to the panel's own size (a split beside a notebook or the full width),
     not the window's. */
  container: nbdist-panel / size;
  display: flex;
  flex-direction: column;
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
  font-family: var(--jp-ui-font-family);
  font-size: var(--jp-ui-font-size1);
  overflow: hidden;
}

.nbdist-header {
  display: flex;
  flex-wrap: wrap;
  align-items: center;
  gap: 2px 12px;
  padding: 6px 10px;
  border-bottom: 1px solid var(--jp-border-color2);
}

.nbdist-status {
  font-weight: 600;
}

.nbdist-totals {
  flex: 1 1 220px;
  min-width: 0;
  color: var(--jp-ui-font-color2);
}

.nbdist-message {
  padding: 8px 10px;
  border-bottom: 1px solid var(--jp-border-color2);
  background: var(--jp-layout-color2);
}

.nbdist-message[data-kind='error'] {
  background: var(--jp-error-color3, #fdd);
  color: var(--jp-error-color0, #900);
}

.nbdist-message[data-kind='warning'] {
  background: var(--jp-warn-color3, #ffe9b3);
}

.nbdist-message[data-kind='empty'] {
  font-size: var(--jp-ui-font-size2);
  padding: 16px 10px;
}

.nbdist-grid {
  flex: 1;
  min-height: 0;
  display: grid;
  grid-template-columns: minmax(0, 3fr) minmax(0, 2fr);
  grid-template-rows: minmax(0, 3fr) minmax(0, 2fr);
  gap: 1px;
  background: var(--jp-border-color2);
}

.nbdist-grid > * {
  background: var(--jp-layout-color1);
  overflow: auto;
  min-height: 0;
}

.nbdist-graph {
  display: flex;
  flex-direction: column;
  overflow: hidden;
}

.nbdist-graph-bar {
  display: flex;
  align-items: center;
  gap: 4px 6px;
  padding: 4px 8px;
}

.nbdist-graph-view {
  position: relative;
  flex: 1;
  min-height: 0;
}

/* A native scroll area: the sizer is the drawing's size, the canvas stays in view. */
.nbdist-graph-stage {
  position: absolute;
  inset: 0;
  overflow: auto;
}

.nbdist-graph-sizer {
  position: relative;
}

.nbdist-graph-canvas {
  position: sticky;
  top: 0;
  left: 0;
  display: block;
  cursor: grab;
  touch-action: none;
}

.nbdist-legend {
  display: flex;
  flex-wrap: wrap;
  gap: 2px 8px;
  margin-left: 4px;
  color: var(--jp-ui-font-color2);
}

.nbdist-legend-item {
  white-space: nowrap;
}

.nbdist-legend-item i {
  display: inline-block;
  width: 10px;
  height: 10px;
  margin-right: 3px;
  border-radius: 2px;
  vertical-align: middle;
}

.nbdist-tooltip {
  position: absolute;
  z-index: 2;
  max-width: 360px;
  padding: 6px 8px;
  white-space: pre-wrap;
  pointer-events: none;
  background: var(--jp-layout-color0);
  border: 1px solid var(--jp-border-color1);
  box-shadow: var(--jp-elevation-z4);
  font-size: var(--jp-ui-font-size0);
}

.nbdist-visually-hidden {
  position: absolute;
  width: 1px;
  height: 1px;
  margin: -1px;
  padding: 0;
  overflow: hidden;
  clip: rect(0 0 0 0);
  border: 0;
  /* One line per item: in a 1px-wide box, wrapped text costs the page a line break at every
     character (hundreds of ms of layout for a couple of thousand tasks). */
  white-space: nowrap;
  contain: strict;
}

.nbdist-side,
.nbdist-objects,
.nbdist-workers {
  padding: 0 10px 8px;
}

.nbdist-heading {
  margin: 8px 0 4px;
  font-size: var(--jp-ui-font-size1);
}

.nbdist-subheading {
  margin: 8px 0 2px;
  font-size: var(--jp-ui-font-size0);
  color: var(--jp-ui-font-color2);
}

.nbdist-note {
  margin: 2px 0;
  color: var(--jp-ui-font-color2);
}

.nbdist-fields {
  display: grid;
  grid-template-columns: max-content 1fr;
  gap: 2px 8px;
  margin: 0;
}

.nbdist-fields dt {
  color: var(--jp-ui-font-color2);
}

.nbdist-fields dd {
  margin: 0;
  word-break: break-all;
}

.nbdist-error,
.nbdist-output,
.nbdist-stack {
  max-height: 160px;
  overflow: auto;
  margin: 2px 0;
  padding: 4px;
  font-size: var(--jp-code-font-size);
  white-space: pre-wrap;
  background: var(--jp-layout-color2);
}

.nbdist-error {
  color: var(--jp-error-color1, #c00);
}

.nbdist-button {
  border: 1px solid var(--jp-border-color1);
  background: var(--jp-layout-color2);
  color: var(--jp-ui-font-color1);
  border-radius: 3px;
  padding: 1px 8px;
  cursor: pointer;
}

.nbdist-wait-list {
  list-style: none;
  margin: 0;
  padding: 0;
}

/* Label and figure on one line, the bar under them: nothing overlaps at any width, and
   long text wraps instead of being cut. */
.nbdist-wait,
.nbdist-node,
.nbdist-capacity-row {
  display: grid;
  grid-template-columns: minmax(0, 1fr) minmax(0, auto);
  grid-template-areas:
    'label figure'
    'bar bar';
  align-items: baseline;
  gap: 1px 10px;
  padding: 3px 0;
}

.nbdist-wait > .nbdist-label,
.nbdist-node > .nbdist-label,
.nbdist-capacity-row > .nbdist-label {
  grid-area: label;
  overflow-wrap: anywhere;
}

.nbdist-wait > .nbdist-figure,
.nbdist-node > .nbdist-figure,
.nbdist-capacity-row > .nbdist-figure {
  grid-area: figure;
  text-align: right;
}

.nbdist-wait > .nbdist-bar,
.nbdist-node > .nbdist-bar,
.nbdist-capacity-row > .nbdist-bar {
  grid-area: bar;
}

/* Why a long wait waits (nbdist.util.why), under its bar. */
.nbdist-wait > .nbdist-wait-why {
  grid-column: 1 / -1;
  margin: 2px 0 0;
  max-height: 120px;
  overflow: auto;
  font-size: var(--jp-code-font-size);
  white-space: pre-wrap;
  overflow-wrap: anywhere;
}

.nbdist-wait.nbdist-done {
  opacity: 0.6;
}

.nbdist-bar {
  position: relative;
  height: 10px;
  background: var(--jp-layout-color3);
  border-radius: 2px;
  overflow: hidden;
}

/* Scaled, not resized: a transform needs no layout, so updates at 10 Hz stay cheap. */
.nbdist-bar-fill {
  height: 100%;
  background: #2f80ed;
  transform-origin: left;
  transform: scaleX(0);
}

.nbdist-done .nbdist-bar-fill {
  background: #27ae60;
}

.nbdist-timed-out .nbdist-bar-fill {
  background: #f2994a;
}

.nbdist-bar-mark {
  position: absolute;
  top: 0;
  bottom: 0;
  width: 2px;
  margin-left: -1px;
  background: var(--jp-ui-font-color1);
}

.nbdist-figure {
  color: var(--jp-ui-font-color2);
  overflow-wrap: anywhere;
}

.nbdist-table {
  width: 100%;
  border-collapse: collapse;
  font-size: var(--jp-ui-font-size0);
}

.nbdist-table th,
.nbdist-table td {
  text-align: left;
  padding: 1px 6px 1px 0;
  white-space: nowrap;
}

.nbdist-table th {
  color: var(--jp-ui-font-color2);
  position: sticky;
  top: 0;
  background: var(--jp-layout-color1);
}

.nbdist-object-more {
  display: none;
}

.nbdist-objects {
  container: nbdist-objects / inline-size;
}

/* A narrow object table: id, size, maker and state stay columns; owner, locations, where and
   refs fold into a detail line under each row. */
@container nbdist-objects (max-width: 620px) {
  .nbdist-table,
  .nbdist-table thead,
  .nbdist-table tbody {
    display: block;
  }

  .nbdist-table tr {
    display: grid;
    grid-template-columns: minmax(0, 11.5em) minmax(0, 5em) minmax(0, 1fr) minmax(0, 1fr);
    column-gap: 6px;
    padding: 1px 0;
  }

  .nbdist-table th,
  .nbdist-table td {
    padding: 0;
    white-space: normal;
    overflow-wrap: anywhere;
  }

  .nbdist-table th:nth-child(n + 4):nth-child(-n + 7),
  .nbdist-table td:nth-child(n + 4):nth-child(-n + 7) {
    display: none;
  }

  .nbdist-table .nbdist-object-more {
    display: block;
    grid-column: 1 / -1;
    padding-left: 1em;
    color: var(--jp-ui-font-color2);
  }

  .nbdist-table tbody tr + tr {
    border-top: 1px solid var(--jp-border-color3);
  }
}

/* Beside a notebook: one column, the graph on top, the other views under it; the panel
   scrolls instead of squeezing each view. */
@container nbdist-panel (max-width: 760px) {
  .nbdist-grid {
    display: block;
    overflow-y: auto;
    background: var(--jp-layout-color1);
  }

  .nbdist-grid > * {
    overflow: visible;
    border-bottom: 1px solid var(--jp-border-color2);
  }

  /* As tall as the drawing needs at full size (--nbdist-graph-h, set by the view), within
     bounds: a small graph leaves room for the other views. */
  .nbdist-grid > .nbdist-graph {
    height: clamp(160px, calc(var(--nbdist-graph-h, 100cqh) + 64px), max(300px, 58cqh));
    overflow: hidden;
  }
}

/* Library runs (Tune searches, Train runs): a row of their own under the two-by-two grid,
   right under the graph in the one-column layout (document order). */
.nbdist-runs {
  grid-column: 1 / -1;
  grid-row: 3;
  padding: 0 10px 8px;
}

.nbdist-runs[hidden] {
  display: none;
}

.nbdist-grid:has(> .nbdist-runs:not([hidden])) {
  grid-template-rows: minmax(0, 3fr) minmax(0, 2fr) minmax(0, 3fr);
}

.nbdist-run + .nbdist-run {
  border-top: 1px solid var(--jp-border-color2);
  margin-top: 6px;
}

.nbdist-run-bar {
  display: flex;
  flex-wrap: wrap;
  align-items: baseline;
  gap: 2px 10px;
}

.nbdist-run-title {
  flex: 1 1 auto;
  min-width: 0;
  overflow-wrap: anywhere;
}

.nbdist-run-chart {
  display: block;
  width: 100%;
  max-width: 720px;
  height: auto;
  color: var(--jp-ui-font-color2);
}

.nbdist-run-axis,
.nbdist-run-empty {
  font-size: 11px;
  fill: currentColor;
}

.nbdist-run-table td {
  overflow-wrap: anywhere;
}

.nbdist-run-swatch {
  display: inline-block;
  width: 10px;
  height: 10px;
  margin-right: 4px;
  border-radius: 2px;
  vertical-align: middle;
}

.nbdist-run-terminated {
  color: var(--jp-ui-font-color2);
}

.nbdist-run-error {
  color: var(--jp-error-color1, #d62728);
}

.nbdist-run-running {
  color: var(--jp-brand-color1, #1f77b4);
}
`,""]),n.d(e,{},{A:a})},293(t,e,n){var r=n(601),i=n.n(r),o=n(314),a=(n.n(o))()(i());a.push([t.id,`/* Application metrics and placement groups: a row of their own under everything else, as
   tall as their tables (up to a limit); hidden while there are none. */
.nbdist-metrics {
  grid-column: 1 / -1;
  grid-row: 4;
  max-height: 14em;
  padding: 0 10px 8px;
}

.nbdist-metrics[hidden],
.nbdist-metrics-table[hidden] {
  display: none;
}

.nbdist-metrics-table caption {
  text-align: left;
  font-size: var(--jp-ui-font-size0);
  color: var(--jp-ui-font-color2);
  padding: 4px 0 2px;
}

.nbdist-metric-value {
  font-variant-numeric: tabular-nums;
}

.nbdist-metric-buckets {
  font-size: var(--jp-ui-font-size0);
  color: var(--jp-ui-font-color2);
}

/* In the one-column layout the panel scrolls: the tables take the height they need. */
@container nbdist-panel (max-width: 760px) {
  .nbdist-grid > .nbdist-metrics {
    max-height: none;
  }
}
`,""]),n.d(e,{},{A:a})},314(t){t.exports=function(t){var e=[];return e.toString=function(){return this.map(function(e){var n="",r=void 0!==e[5];return e[4]&&(n+="@supports (".concat(e[4],") {")),e[2]&&(n+="@media ".concat(e[2]," {")),r&&(n+="@layer".concat(e[5].length>0?" ".concat(e[5]):""," {")),n+=t(e),r&&(n+="}"),e[2]&&(n+="}"),e[4]&&(n+="}"),n}).join("")},e.i=function(t,n,r,i,o){"string"==typeof t&&(t=[[null,t,void 0]]);var a={};if(r)for(var d=0;d<this.length;d++){var s=this[d][0];null!=s&&(a[s]=!0)}for(var l=0;l<t.length;l++){var p=[].concat(t[l]);r&&a[p[0]]||(void 0!==o&&(void 0===p[5]||(p[1]="@layer".concat(p[5].length>0?" ".concat(p[5]):""," {").concat(p[1],"}")),p[5]=o),n&&(p[2]&&(p[1]="@media ".concat(p[2]," {").concat(p[1],"}")),p[2]=n),i&&(p[4]?(p[1]="@supports (".concat(p[4],") {").concat(p[1],"}"),p[4]=i):p[4]="".concat(i)),e.push(p))}},e}},601(t){t.exports=function(t){return t[1]}},72(t){var e=[];function n(t){for(var n=-1,r=0;r<e.length;r++)if(e[r].identifier===t){n=r;break}return n}function r(t,r){for(var i={},o=[],a=0;a<t.length;a++){var d=t[a],s=r.base?d[0]+r.base:d[0],l=i[s]||0,p="".concat(s," ").concat(l);i[s]=l+1;var c=n(p),b={css:d[1],media:d[2],sourceMap:d[3],supports:d[4],layer:d[5]};if(-1!==c)e[c].references++,e[c].updater(b);else{var u=function(t,e){var n=e.domAPI(e);return n.update(t),function(e){e?(e.css!==t.css||e.media!==t.media||e.sourceMap!==t.sourceMap||e.supports!==t.supports||e.layer!==t.layer)&&n.update(t=e):n.remove()}}(b,r);r.byIndex=a,e.splice(a,0,{identifier:p,updater:u,references:1})}o.push(p)}return o}t.exports=function(t,i){var o=r(t=t||[],i=i||{});return function(t){t=t||[];for(var a=0;a<o.length;a++){var d=n(o[a]);e[d].references--}for(var s=r(t,i),l=0;l<o.length;l++){var p=n(o[l]);0===e[p].references&&(e[p].updater(),e.splice(p,1))}o=s}}},659(t){var e={};t.exports=function(t,n){var r=function(t){if(void 0===e[t]){var n=document.querySelector(t);if(window.HTMLIFrameElement&&n instanceof window.HTMLIFrameElement)try{n=n.contentDocument.head}catch(t){n=null}e[t]=n}return e[t]}(t);if(!r)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");r.appendChild(n)}},540(t){t.exports=function(t){var e=document.createElement("style");return t.setAttributes(e,t.attributes),t.insert(e,t.options),e}},56(t,e,n){t.exports=function(t){var e=n.nc;e&&t.setAttribute("nonce",e)}},206(t){t.exports=function(t){if("u"<typeof document)return{update:function(){},remove:function(){}};var e=t.insertStyleElement(t);return{update:function(n){var r,i,o;r="",n.supports&&(r+="@supports (".concat(n.supports,") {")),n.media&&(r+="@media ".concat(n.media," {")),(i=void 0!==n.layer)&&(r+="@layer".concat(n.layer.length>0?" ".concat(n.layer):""," {")),r+=n.css,i&&(r+="}"),n.media&&(r+="}"),n.supports&&(r+="}"),(o=n.sourceMap)&&"u">typeof btoa&&(r+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(o))))," */")),t.styleTagTransform(r,e,t.options)},remove:function(){var t;null===(t=e).parentNode||t.parentNode.removeChild(t)}}}},113(t){t.exports=function(t,e){if(e.styleSheet)e.styleSheet.cssText=t;else{for(;e.firstChild;)e.removeChild(e.firstChild);e.appendChild(document.createTextNode(t))}}},820(t,e,n){var r=n(72),i=n.n(r),o=n(206),a=n.n(o),d=n(659),s=n.n(d),l=n(56),p=n.n(l),c=n(540),b=n.n(c),u=n(113),h=n.n(u),f=n(475),g={};g.styleTagTransform=h(),g.setAttributes=p(),g.insert=s().bind(null,"head"),g.domAPI=a(),g.insertStyleElement=b(),i()(f.A,g),f.A&&f.A.locals&&f.A.locals;var m=n(293),x={};x.styleTagTransform=h(),x.setAttributes=p(),x.insert=s().bind(null,"head"),x.domAPI=a(),x.insertStyleElement=b(),i()(m.A,x),m.A&&m.A.locals&&m.A.locals}}]);