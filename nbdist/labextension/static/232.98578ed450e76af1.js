"use strict";(self.rspackChunknbdist_panel=self.rspackChunknbdist_panel||[]).push([[232],{475(t,r,e){var o=e(601),n=e.n(o),a=e(314),i=(e.n(a))()(n());i.push([t.id,`.nbdist-panel {
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
  align-items: center;
  gap: 12px;
  padding: 6px 10px;
  border-bottom: 1px solid var(--jp-border-color2);
}

.nbdist-status {
  font-weight: 600;
}

.nbdist-totals {
  flex: 1;
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
  gap: 10px;
  padding: 4px 8px;
}

.nbdist-graph-stage {
  position: relative;
  flex: 1;
  min-height: 0;
  overflow: hidden;
}

.nbdist-graph-canvas {
  position: absolute;
  inset: 0;
  cursor: grab;
  touch-action: none;
}

.nbdist-legend {
  display: flex;
  flex-wrap: wrap;
  gap: 8px;
  color: var(--jp-ui-font-color2);
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
.nbdist-output {
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

.nbdist-wait,
.nbdist-node,
.nbdist-capacity-row {
  display: grid;
  grid-template-columns: minmax(80px, 1fr) minmax(60px, 2fr) max-content;
  align-items: center;
  gap: 6px;
  padding: 2px 0;
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
  white-space: nowrap;
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
`,""]),e.d(r,{},{A:i})},314(t){t.exports=function(t){var r=[];return r.toString=function(){return this.map(function(r){var e="",o=void 0!==r[5];return r[4]&&(e+="@supports (".concat(r[4],") {")),r[2]&&(e+="@media ".concat(r[2]," {")),o&&(e+="@layer".concat(r[5].length>0?" ".concat(r[5]):""," {")),e+=t(r),o&&(e+="}"),r[2]&&(e+="}"),r[4]&&(e+="}"),e}).join("")},r.i=function(t,e,o,n,a){"string"==typeof t&&(t=[[null,t,void 0]]);var i={};if(o)for(var s=0;s<this.length;s++){var d=this[s][0];null!=d&&(i[d]=!0)}for(var p=0;p<t.length;p++){var l=[].concat(t[p]);o&&i[l[0]]||(void 0!==a&&(void 0===l[5]||(l[1]="@layer".concat(l[5].length>0?" ".concat(l[5]):""," {").concat(l[1],"}")),l[5]=a),e&&(l[2]&&(l[1]="@media ".concat(l[2]," {").concat(l[1],"}")),l[2]=e),n&&(l[4]?(l[1]="@supports (".concat(l[4],") {").concat(l[1],"}"),l[4]=n):l[4]="".concat(n)),r.push(l))}},r}},601(t){t.exports=function(t){return t[1]}},72(t){var r=[];function e(t){for(var e=-1,o=0;o<r.length;o++)if(r[o].identifier===t){e=o;break}return e}function o(t,o){for(var n={},a=[],i=0;i<t.length;i++){var s=t[i],d=o.base?s[0]+o.base:s[0],p=n[d]||0,l="".concat(d," ").concat(p);n[d]=p+1;var c=e(l),u={css:s[1],media:s[2],sourceMap:s[3],supports:s[4],layer:s[5]};if(-1!==c)r[c].references++,r[c].updater(u);else{var f=function(t,r){var e=r.domAPI(r);return e.update(t),function(r){r?(r.css!==t.css||r.media!==t.media||r.sourceMap!==t.sourceMap||r.supports!==t.supports||r.layer!==t.layer)&&e.update(t=r):e.remove()}}(u,o);o.byIndex=i,r.splice(i,0,{identifier:l,updater:f,references:1})}a.push(l)}return a}t.exports=function(t,n){var a=o(t=t||[],n=n||{});return function(t){t=t||[];for(var i=0;i<a.length;i++){var s=e(a[i]);r[s].references--}for(var d=o(t,n),p=0;p<a.length;p++){var l=e(a[p]);0===r[l].references&&(r[l].updater(),r.splice(l,1))}a=d}}},659(t){var r={};t.exports=function(t,e){var o=function(t){if(void 0===r[t]){var e=document.querySelector(t);if(window.HTMLIFrameElement&&e instanceof window.HTMLIFrameElement)try{e=e.contentDocument.head}catch(t){e=null}r[t]=e}return r[t]}(t);if(!o)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");o.appendChild(e)}},540(t){t.exports=function(t){var r=document.createElement("style");return t.setAttributes(r,t.attributes),t.insert(r,t.options),r}},56(t,r,e){t.exports=function(t){var r=e.nc;r&&t.setAttribute("nonce",r)}},206(t){t.exports=function(t){if("u"<typeof document)return{update:function(){},remove:function(){}};var r=t.insertStyleElement(t);return{update:function(e){var o,n,a;o="",e.supports&&(o+="@supports (".concat(e.supports,") {")),e.media&&(o+="@media ".concat(e.media," {")),(n=void 0!==e.layer)&&(o+="@layer".concat(e.layer.length>0?" ".concat(e.layer):""," {")),o+=e.css,n&&(o+="}"),e.media&&(o+="}"),e.supports&&(o+="}"),(a=e.sourceMap)&&"u">typeof btoa&&(o+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(a))))," */")),t.styleTagTransform(o,r,t.options)},remove:function(){var t;null===(t=r).parentNode||t.parentNode.removeChild(t)}}}},113(t){t.exports=function(t,r){if(r.styleSheet)r.styleSheet.cssText=t;else{for(;r.firstChild;)r.removeChild(r.firstChild);r.appendChild(document.createTextNode(t))}}},579(t,r,e){var o=e(72),n=e.n(o),a=e(206),i=e.n(a),s=e(659),d=e.n(s),p=e(56),l=e.n(p),c=e(540),u=e.n(c),f=e(113),b=e.n(f),g=e(475),m={};m.styleTagTransform=b(),m.setAttributes=l(),m.insert=d().bind(null,"head"),m.domAPI=i(),m.insertStyleElement=u(),n()(g.A,m),g.A&&g.A.locals&&g.A.locals}}]);