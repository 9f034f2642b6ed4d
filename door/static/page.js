// The door's page: plain DOM, same-origin fetches to the door's own routes, no library.
"use strict";

const $ = (selector) => document.querySelector(selector);

function headers(extra = {}) {
  const key = $("#api-key").value.trim();
  return key ? { ...extra, "X-API-Key": key } : extra;
}

function showError(message) {
  $("#error").textContent = message;
  $("#error").hidden = !message;
}

// One call to a route; a problem body (RFC 9457) becomes an Error with its title, detail and Retry-After.
async function call(path, init) {
  const response = await fetch(path, init);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const wait = response.headers.get("Retry-After");
    const title = body.title || response.statusText;
    throw new Error(`${path}: ${response.status} ${title}. ${body.detail || ""}${wait ? ` Try again in ${wait} s.` : ""}`);
  }
  return body;
}

function colour(score, alpha = 0.45) {
  return `hsla(${Math.round(120 * (1 - score))}, 85%, 50%, ${alpha})`;
}

function percent(score) {
  return `${(100 * score).toFixed(1)} %`;
}

// Chunk offsets count Unicode code points (Python's str), so the text is sliced as code points too.
function renderText(text, result) {
  const chars = Array.from(text);
  const out = $("#highlighted");
  out.replaceChildren();
  let at = 0;
  result.chunks.forEach((chunk, index) => {
    if (chunk.start > at) out.append(chars.slice(at, chunk.start).join(""));
    const span = document.createElement("span");
    span.className = "chunk";
    span.dataset.score = String(chunk.score);
    span.style.background = colour(chunk.score);
    span.title = `chunk ${index + 1}: ${percent(chunk.score)} AI-generated`;
    span.textContent = chars.slice(chunk.start, chunk.end).join("");
    out.append(span);
    at = Math.max(at, chunk.end);
  });
  if (at < chars.length) out.append(chars.slice(at).join(""));
  const overall = $("#overall");
  overall.dataset.score = String(result.score);
  const bar = document.createElement("div");
  bar.className = "bar";
  const fill = document.createElement("span");
  fill.style.width = percent(result.score).replace(" ", "");
  fill.style.background = colour(result.score, 0.9);
  bar.append(fill);
  overall.replaceChildren(`AI-generated: ${percent(result.score)} over ${result.chunks.length} chunks`, bar);
  overall.hidden = false;
}

async function scoreText() {
  const button = $("#score-text");
  const text = $("#text").value;
  if (!text.trim()) return;
  button.disabled = true;
  showError("");
  try {
    const result = await call("/v1/radar", {
      method: "POST",
      headers: headers({ "Content-Type": "application/json" }),
      body: JSON.stringify({ text }),
    });
    renderText(text, result);
  } catch (error) {
    showError(error.message);
  } finally {
    button.disabled = false;
  }
}

function drawBoxes(width, height, lines) {
  const svg = $("#overlay");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.replaceChildren();
  for (const line of lines) {
    const polygon = document.createElementNS("http://www.w3.org/2000/svg", "polygon");
    polygon.setAttribute("points", line.box.map(([x, y]) => `${x},${y}`).join(" "));
    const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
    title.textContent = `${line.text} (${line.score.toFixed(3)})`;
    polygon.append(title);
    svg.append(polygon);
  }
  const list = $("#lines");
  list.replaceChildren();
  for (const line of lines) {
    const item = document.createElement("li");
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = line.score.toFixed(3);
    item.append(line.text, score);
    list.append(item);
  }
}

function showCard(result) {
  if (result.color === "unknown" && result.qr === null) {
    $("#no-code").hidden = false; // the reader found no code: say so rather than show an empty card
    return;
  }
  const card = $("#card");
  card.dataset.color = result.color;
  $("#card-color").textContent = result.color;
  $("#card-name").textContent = result.fields.name ?? "—";
  $("#card-datetime").textContent = result.fields.datetime ?? "—";
  $("#card-status").textContent = result.fields.status ?? "—";
  $("#card-qr").textContent = result.qr ?? "none";
  card.hidden = false;
}

function upload(file) {
  const form = new FormData();
  form.append("image", file);
  return { method: "POST", headers: headers(), body: form };
}

async function readImage(file) {
  if (!file) return;
  showError("");
  const picture = $("#picture");
  picture.src = URL.createObjectURL(file);
  $("#stage").hidden = false;
  $("#card").hidden = true;
  $("#no-code").hidden = true;
  $("#overlay").replaceChildren();
  $("#lines").replaceChildren();
  // Only a health code goes to the health-code reader: a document has no card to show.
  const wanted = [call("/v1/ocr", upload(file))];
  if ($("#kind-health-code").checked) wanted.push(call("/v1/health-code", upload(file)));
  const [ocr, code] = await Promise.allSettled(wanted);
  await picture.decode().catch(() => {});
  if (ocr.status === "fulfilled") drawBoxes(picture.naturalWidth, picture.naturalHeight, ocr.value.lines);
  if (code?.status === "fulfilled") showCard(code.value);
  const failed = [ocr, code].filter((outcome) => outcome?.status === "rejected").map((outcome) => outcome.reason.message);
  showError(failed.join("\n"));
}

document.addEventListener("DOMContentLoaded", () => {
  $("#score-text").addEventListener("click", scoreText);
  $("#file").addEventListener("change", (event) => readImage(event.target.files[0]));
  const drop = $("#drop");
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    readImage(event.dataTransfer.files[0]);
  });
});
