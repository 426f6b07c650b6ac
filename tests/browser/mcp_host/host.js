/* A minimal MCP Apps host built on the ext-apps AppBridge, as Claude, ChatGPT or VS Code do it: the ui:// document
   in a sandboxed iframe (scripts only: an opaque origin, no same-origin access, no top navigation), the tool's
   input and result sent in once the View is initialized, and every tools/call the View makes proxied to the
   MCP server with the user's token (window.mcpCallTool: the test's Python side, holding the token). */
window.charmingHost = function (html, toolArguments, toolResult, hostContext) {
  var sdk = window.McpExtAppsBridge;
  var iframe = document.getElementById("app");
  var bridge = new sdk.AppBridge(
    null,
    { name: "Charming test host", version: "1.0.0" },
    { serverTools: {}, logging: {} },
    { hostContext: hostContext }
  );
  window.hostLog = [];
  bridge.oncalltool = function (params) {
    window.hostLog.push(params.name);
    return window.mcpCallTool(params.name, params.arguments || {});
  };
  bridge.onsizechange = function (size) {
    if (size.height) iframe.style.height = Math.min(Math.max(size.height, 200), 4000) + "px";
  };
  bridge.oninitialized = function () {
    bridge.sendToolInput({ arguments: toolArguments });
    bridge.sendToolResult(toolResult);
    window.hostReady = true;
  };
  window.charmingBridge = bridge;
  // Listen before the document loads: its App sends ui/initialize as soon as it runs.
  return bridge.connect(new sdk.PostMessageTransport(iframe.contentWindow, iframe.contentWindow)).then(function () {
    iframe.srcdoc = html;
  });
};
