// ZMem inspector: the little the pages do in the browser. Everything works without it; this
// adds the as-of slider's live preview and a working "Go back" link. No network calls.
"use strict";

function asOfSlider() {
  const slider = document.getElementById("asof-slider");
  if (!slider) return;
  const stops = JSON.parse(slider.dataset.stops || "[]");
  const label = document.getElementById("asof-label");
  const input = document.getElementById("asof-input");
  const show = () => {
    const stop = stops[Number(slider.value)];
    if (!stop) return;
    label.textContent = stop.at + (stop.id ? "" : " (nothing valid)");
    input.value = stop.at;
    document.querySelectorAll("#timeline .version").forEach((el) => {
      el.classList.toggle("at", el.dataset.id === stop.id);
    });
  };
  slider.addEventListener("input", show);
}

function backLinks() {
  document.querySelectorAll("[data-back]").forEach((a) => {
    a.addEventListener("click", (event) => {
      if (history.length > 1) {
        event.preventDefault();
        history.back();
      }
    });
  });
}

document.addEventListener("DOMContentLoaded", () => {
  asOfSlider();
  backLinks();
});
