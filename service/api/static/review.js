// Keyboard shortcuts of the review page (no framework; the page works without this file).
"use strict";
(function () {
  function submitWith(form, id) {
    var button = document.getElementById(id);
    if (button) { form.requestSubmit(button); }
  }
  function check(form, name, value) {
    var el = form.querySelector('input[name="' + name + '"][value="' + value + '"]');
    if (el) { el.checked = true; }
  }
  document.addEventListener("keydown", function (ev) {
    var t = ev.target;
    var typing = t.tagName === "TEXTAREA" || t.tagName === "SELECT" ||
      (t.tagName === "INPUT" && (t.type === "text" || t.type === "password"));
    if (typing) { if (ev.key === "Escape") { t.blur(); } return; }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    var form = document.getElementById("label-form");
    if (ev.key === "n") {
      var next = document.getElementById("next-link");
      if (next) { ev.preventDefault(); next.click(); }
      return;
    }
    if (!form) { return; }
    var handled = true;
    switch (ev.key) {
      case "y": check(form, "faithful", "yes"); break;
      case "x": check(form, "faithful", "no"); break;
      case "a": check(form, "answerable", "yes"); break;
      case "z": check(form, "answerable", "no"); break;
      case "r": form.elements.reason.focus(); break;
      case "o": form.elements.note.focus(); break;
      case "g": form.elements.added_gold_ids.focus(); break;
      case "s": submitWith(form, "save"); break;
      case "Enter": submitWith(form, "save-next"); break;
      default:
        if (/^[1-9]$/.test(ev.key)) {
          var box = form.querySelectorAll('input[name="gold_ids"]')[Number(ev.key) - 1];
          if (box) { box.checked = !box.checked; }
        } else { handled = false; }
    }
    if (handled) { ev.preventDefault(); }
  });
})();
